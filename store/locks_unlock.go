package store

import "encoding/binary"

// unhold runs Unlock c from o on holder h (c already carries h's LockId and,
// for an UnlockHead, its parameters). It reports whether a tree-unlock chain
// goes on, with c set to its next step.
func (l *Locks) unhold(o Owner, h *lockItem, c *LockCommand, now int64) bool {
	k, d := h.k, h.k.db
	l.cow(k)
	one := h.levels == 1
	full := one || c.Rcount == 0 || c.byPriority()
	before := l.current(k)
	released := h.cmd.LockID
	if full {
		d.st.UnLockCount += uint64(h.levels)
		l.removeHolder(h)
	} else {
		d.st.UnLockCount++
		h.levels--
		k.levels--
		d.st.LockedCount--
		l.touch(h)
	}
	if c.Data != nil {
		h.dataFrame = true
		l.applyData(k, h, o, c.DB, c.Data, k.levels == 0 && k.wait.n == 0)
	}
	if full {
		l.fire(h, stageUnlock, k.hold.n == 0 && k.wait.n == 0)
	}

	requeue := c.requeues() && one && c.Wait.N > 0
	id := c.LockID
	if requeue && h.cmd.lessVersion() {
		binary.LittleEndian.PutUint64(id[:8], version(&id)+1)
	}
	var next LockCommand
	chain := false
	tree := c.unlocksTree() && full && !c.requeues()
	switch {
	case tree && k.levels == 1 && k.hold.head.cmd.locksTree():
		// The last holder is a tree link: unlock it next.
		t := k.hold.head.cmd.LockID
		l.reply(o, c, LockOK, t, 1, 0, before)
		next, chain = *c, true
		next.LockID = t
	case tree && k.levels == 0:
		// Nothing left: unlock the parent, the key named by the released LockId.
		l.out = append(l.out, LockReply{
			Owner: o, Kind: KindUnlock, RequestID: c.RequestID, Result: LockOK, DB: c.DB,
			LockID: c.Key, Key: released, Count: c.Count, Rcount: c.Rcount, Value: before,
		})
		next, chain = *c, true
		next.Key, next.LockID = released, c.Key
	default:
		var lr uint8
		if !full {
			lr = h.levels
		}
		l.reply(o, c, LockOK, id, k.levels, lr, before)
	}

	if requeue {
		rc := h.cmd
		rc.LockID = id
		rc.copyTimes(c)
		rc.ExpireAt = c.ExpireAt
		rc.Count, rc.Rcount = c.Count, c.Rcount
		if l.waitersFull(k, h.owner) {
			l.reply(h.owner, &rc, LockTimeout, rc.LockID, k.levels, 0, l.current(k))
		} else {
			l.enqueue(l.newItem(k, h.owner, &rc, now))
		}
	}
	l.wake(k, now)
	l.settle(k)
	if full {
		l.freeItem(h)
	}
	if chain {
		next.RequestID = l.requestID(now)
		next.Data = nil
		*c = next
	}
	return chain
}

// waitersFull reports whether k, or owner o, has as many queued requests as
// allowed.
func (l *Locks) waitersFull(k *lockKey, o Owner) bool {
	if l.cfg.MaxWaitersPerKey > 0 && k != nil && k.wait.n >= l.cfg.MaxWaitersPerKey {
		return true
	}
	if l.cfg.MaxWaitersPerOwner > 0 {
		if r := l.owners[o]; r != nil && r.waiters >= l.cfg.MaxWaitersPerOwner {
			return true
		}
	}
	return false
}

// applyData applies record rec, carried by a command of o on k in database
// db that succeeded (§3.2). h is the holder the command made, re-entered,
// updated or released, which stage 1–3 EXECUTEs attach to; nil if none. fol
// tells whether PROCESS_FIRST_OR_LAST records apply: on a Lock, the key has
// exactly one level; on an Unlock, it has none and no waiters.
func (l *Locks) applyData(k *lockKey, h *lockItem, o Owner, db uint8, rec []byte, fol bool) {
	r, ok := parseRecord(rec)
	if !ok {
		return
	}
	if r.stage != stageCurrent {
		if r.cmd == dataExecute {
			l.attach(h, &r, db)
		}
		return
	}
	if r.flag&dataFirstOrLast != 0 && !fol {
		return
	}
	if r.cmd == dataExecute {
		l.execNow(o, db, r.value)
		return
	}
	var v record
	if k.has {
		v, _ = parseRecord(k.value)
	}
	l.tmp = l.tmp[:0]
	if cap(l.tmp) > lockKeepBuf {
		l.tmp = nil
	}
	var (
		eff        effect
		start, end int
		cmd        = r.cmd
	)
	if r.cmd == dataPipeline {
		start, end, eff, cmd = l.pipeline(k.has, &v, h, o, db, r.value, fol, 0)
	} else {
		l.tmp, eff = applyEffect(l.tmp, k.has, &v, &r)
		end = len(l.tmp)
	}
	switch {
	case eff == replaced && end-start-4 > l.cfg.MaxValue:
		// Too long: nothing changes.
	case eff == replaced:
		l.cow(k)
		k.value = append(k.value[:0], l.tmp[start:end]...)
		k.has = true
		k.valueCmd = cmd
		l.syncValue(k)
		l.changed(k)
		l.modified(k)
	case eff == unset:
		l.cow(k)
		k.has = false
		l.syncValue(k)
		l.changed(k)
		l.modified(k)
	}
}

// pipeline runs the elements of a PIPELINE value on a key whose value is v
// (has: whether it has one): each stage-0 non-EXECUTE element computes its
// effect on v, the value before the PIPELINE, into l.tmp, and the last one
// that changes anything wins. It returns where that result lies in l.tmp,
// the effect and the element's command.
func (l *Locks) pipeline(has bool, v *record, h *lockItem, o Owner, db uint8, b []byte, fol bool, depth int) (start, end int, eff effect, cmd uint8) {
	for len(b) > 0 {
		el, rest, ok := nextElement(b)
		if !ok {
			break
		}
		b = rest
		r, ok := parseRecord(el)
		if !ok {
			continue
		}
		if r.stage != stageCurrent {
			if r.cmd == dataExecute {
				l.attach(h, &r, db)
			}
			continue
		}
		if r.flag&dataFirstOrLast != 0 && !fol {
			continue
		}
		switch r.cmd {
		case dataExecute:
			l.execNow(o, db, r.value)
		case dataPipeline:
			if depth < maxPipelineDepth {
				if s, e, ef, c := l.pipeline(has, v, h, o, db, r.value, fol, depth+1); ef != unchanged {
					start, end, eff, cmd = s, e, ef, c
				}
			}
		default:
			s := len(l.tmp)
			var ef effect
			l.tmp, ef = applyEffect(l.tmp, has, v, &r)
			if ef != unchanged {
				start, end, eff, cmd = s, len(l.tmp), ef, r.cmd
			}
		}
	}
	return start, end, eff, cmd
}

// execNow hands EXECUTE value v back to be run at once for o: opaque bytes, which the
// caller decodes (a Lock or Unlock frame of db, and its data record) or ignores.
func (l *Locks) execNow(o Owner, db uint8, v []byte) {
	l.ex = append(l.ex, Exec{Owner: o, DB: db, Frame: l.save(v)})
}

// attach keeps the stage 1 or 3 EXECUTE record r with holder h, to run when
// h is released or expires. Stage 2 never fires on a standalone server.
func (l *Locks) attach(h *lockItem, r *record, db uint8) {
	if h == nil || r.stage == stageTimeout {
		return
	}
	f := r.value // opaque: decoded by the caller when it fires
	var fol uint8
	if r.flag&dataFirstOrLast != 0 {
		fol = 1
	}
	was := h.bufs()
	h.execs = append(h.execs, r.stage, fol)
	h.execs = binary.LittleEndian.AppendUint32(h.execs, uint32(len(f)))
	h.execs = append(h.execs, f...)
	l.itemBytes += h.bufs() - was
}
