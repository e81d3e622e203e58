package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/slock"
)

// Time flags of slock's Timeout and Expried fields.
const (
	timeMinutes = 0x0040
	timeMillis  = 0x0400
	neverExpire = 0x4000
)

// slockConn is a client connection speaking slock's binary frames.
type slockConn struct {
	*conn
	seq uint64
}

func (a *app) dialSlock() (*slockConn, error) {
	c, err := a.dial("slock", a.slockPort)
	if err != nil {
		return nil, err
	}
	return &slockConn{conn: c}, nil
}

// newID returns a fresh RequestId: random, so that ids never collide with
// another client's.
func (s *slockConn) newID() (id [16]byte) {
	_, _ = rand.Read(id[:8])
	s.seq++
	for i := 0; i < 8; i++ {
		id[15-i] = byte(s.seq >> (8 * i))
	}
	return id
}

// reply reads frames until the reply of type t to request id, waiting up to
// the timeout plus wait. Unasked frames (an INIT after a role change) are
// skipped; pushed ones about id (EXPRIED) are returned as they are.
func (s *slockConn) reply(t slock.Type, id [16]byte, wait time.Duration) (slock.Reply, error) {
	for {
		var r slock.Reply
		err := s.recv(wait, func(b []byte) (int, error) { return slock.ParseReply(b, maxReply, &r) })
		if err != nil {
			return r, err
		}
		if r.Type == t && r.RequestID == id {
			return r, nil
		}
	}
}

// call runs a CALL and returns its body; a result other than OK is a
// refusal that starts with what.
func (s *slockConn) call(what, method string, body []byte) ([]byte, error) {
	id := s.newID()
	if err := s.send(slock.AppendCallRequest(nil, id, method, body)); err != nil {
		return nil, err
	}
	r, err := s.reply(slock.TypeCall, id, 0)
	if err != nil {
		return nil, err
	}
	if r.Result != slock.ResultOK {
		fields := map[string]any{"result": r.Result.String(), "error_type": string(r.ErrType)}
		msg := r.Result.String()
		if len(r.ErrType) > 0 {
			msg += " " + string(r.ErrType)
		}
		if string(r.ErrType) == slock.ErrTypeLockManager {
			msg = "nobody holds it (" + msg + ")"
		}
		return nil, refuse(fields, "%s: %s %s", what, method, msg)
	}
	return append([]byte(nil), r.Body...), nil
}

// keyText shows a 16-byte key or LockId the way the text protocol's
// names map to it: a short printable name right-aligned in zeros is shown
// as that name, anything else as 32 hex digits.
func keyText(id [16]byte) string {
	i := 0
	for i < 16 && id[i] == 0 {
		i++
	}
	if i == 16 {
		return hex.EncodeToString(id[:])
	}
	for _, c := range id[i:] {
		if c <= ' ' || c >= 0x7f {
			return hex.EncodeToString(id[:])
		}
	}
	s := string(id[i:])
	if len(s) == 32 && isHexString(s) { // would read back as hex
		return hex.EncodeToString(id[:])
	}
	return s
}

// keyBytes is the 16-byte key a KEY argument names.
func keyBytes(key string) []byte {
	id := slock.TextID([]byte(key))
	return id[:]
}

func isHexString(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// parseWait parses a --timeout or --expired value into slock's u16 time and
// its unit flag: "5" (seconds), "5s", "500ms", "2m", or for expired
// "never". d is the duration it stands for (0 for never).
func parseWait(what, s string, allowNever bool) (v, flag uint16, d time.Duration, err error) {
	if allowNever && s == "never" {
		return 1, neverExpire, 0, nil // Expried 0 would be a probe that holds nothing
	}
	if n, e := strconv.ParseUint(s, 10, 16); e == nil {
		return uint16(n), 0, time.Duration(n) * time.Second, nil
	}
	d, e := time.ParseDuration(s)
	bad := func(why string) (uint16, uint16, time.Duration, error) {
		hint := `seconds (0 to 65535) or a duration such as 500ms, 30s, 10m`
		if allowNever {
			hint += `, or "never"`
		}
		return 0, 0, 0, &usageError{msg: fmt.Sprintf("--%s %q %s: want %s", what, s, why, hint)}
	}
	switch {
	case e != nil:
		return bad("is not a number of seconds or a duration")
	case d < 0:
		return bad("is negative")
	case d%time.Second == 0 && d/time.Second <= 0xffff:
		return uint16(d / time.Second), 0, d, nil
	case d%time.Millisecond == 0 && d/time.Millisecond <= 0xffff:
		return uint16(d / time.Millisecond), timeMillis, d, nil
	case d%time.Minute == 0 && d/time.Minute <= 0xffff:
		return uint16(d / time.Minute), timeMinutes, d, nil
	}
	return bad("does not fit: slock counts up to 65535 milliseconds, seconds or minutes")
}

// oldSpelling accepts slock's spelling of a flag, which tallyctl printed before: --expried
// and --expried-flag are --expired and --expired-flag (the wire field is still Expried).
func oldSpelling(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "expried":
		name = "expired"
	case "expried-flag":
		name = "expired-flag"
	}
	return pflag.NormalizedName(name)
}

// lockOpts are the flags of lock and unlock.
type lockOpts struct {
	lockID      string
	timeout     string
	expried     string
	count       uint16
	rcount      uint8
	flag        uint8
	timeoutFlag uint16
	expriedFlag uint16
	db          uint8
	first       bool
	hold        time.Duration
}

func init() {
	dbFlag := func(fs *pflag.FlagSet, db *uint8) {
		fs.Uint8Var(db, "db", 0, "database (DbId 0-254)")
	}
	register(
		&command{group: "slock", name: "lock", args: "KEY", nargs: [2]int{1, 1},
			summary: "LOCK: take KEY, waiting up to --timeout, held until unlocked or --expired runs out",
			help: `KEY and --lock-id map to slock's 16 bytes as in its Redis text protocol: 16 bytes as is,
32 hex digits decoded, longer names MD5-hashed, shorter ones right-aligned in zeros. With
no --lock-id a random one is made; it is printed, and 'slock unlock KEY --lock-id ID'
takes it back. slock locks do not end when the connection closes: a lock stays until it
is unlocked or expires. With --hold, tallyctl keeps it for that long (Ctrl-C ends the hold
early) and then unlocks it.

Times are seconds ("5"), or a duration ("500ms", "30s", "10m") sent in slock's
milliseconds or minutes unit; --expired never holds it until unlocked (sent as 1 with
flag 0x4000), --expired 0 only waits until the key is free and holds nothing. --timeout 0
is a try-lock. --count N lets N holders share the key (1: exclusive); --rcount N lets the
same LockId take it N times. Note: after 'slock lock', --timeout is the lock's wait;
the network timeout is then the global --timeout given before 'slock'.

Prints the result and the reply's counts, and on a grant its fencing token (read with
TOKEN KEY LOCK_ID id on a Redis-text connection: see 'slock token'); OK exits 0, anything
else (TIMEOUT, LOCKED_ERROR, UNOWN_ERROR, ...) exits 2.`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var o lockOpts
				fs.StringVar(&o.lockID, "lock-id", "", "LockId (default: a random one, printed)")
				fs.StringVar(&o.timeout, "timeout", "15", "how long to wait for the lock: seconds or a duration; 0 = try once")
				fs.StringVar(&o.expried, "expired", "120", "how long the lock lasts once taken (slock's Expried): seconds, a duration, or never")
				fs.Uint16Var(&o.count, "count", 1, "holders the key admits at once (slock Count + 1)")
				fs.Uint8Var(&o.rcount, "rcount", 1, "times this LockId may hold the key (slock Rcount + 1)")
				fs.Uint8Var(&o.flag, "flag", 0, "LOCK flag bits: 1 show holder instead of waiting, 2 update, 8 concurrent check, 16 tree")
				fs.Uint16Var(&o.timeoutFlag, "timeout-flag", 0, "extra TimeoutFlag bits (16 priority, 512 wait while unlocked, 32768 keep alive, ...)")
				fs.Uint16Var(&o.expriedFlag, "expired-flag", 0, "extra ExpriedFlag bits")
				fs.SetNormalizeFunc(oldSpelling)
				dbFlag(fs, &o.db)
				fs.DurationVar(&o.hold, "hold", 0, "keep the lock for this long (e.g. 10s), then unlock it; Ctrl-C unlocks early")
				return func(a *app, args []string) error { return a.slockLock(args[0], &o) }
			}},
		&command{group: "slock", name: "unlock", args: "KEY", nargs: [2]int{1, 1},
			summary: "UNLOCK: release KEY held by --lock-id",
			help: `Unlocks what --lock-id holds on KEY (all its levels; with --rcount 2 or more, one level).
--first unlocks the key's first holder whoever it is (slock's unlock flag 1).
OK exits 0; UNLOCK_ERROR (not held by that LockId), UNOWN_ERROR, UNKNOWN_DB exit 2.`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var o lockOpts
				fs.StringVar(&o.lockID, "lock-id", "", "LockId that holds the key (required unless --first)")
				fs.BoolVar(&o.first, "first", false, "unlock the first holder if --lock-id does not hold it (flag 1)")
				fs.Uint8Var(&o.rcount, "rcount", 1, "2 or more: release one reentry level instead of all")
				fs.Uint8Var(&o.flag, "flag", 0, "UNLOCK flag bits: 1 first holder, 2 cancel a wait, 8 requeue, 16 tree")
				dbFlag(fs, &o.db)
				return func(a *app, args []string) error { return a.slockUnlock(args[0], &o) }
			}},
		&command{group: "slock", name: "state", args: "", nargs: [2]int{0, 0},
			summary: "STATE: a database's lock counts",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var db uint8
				dbFlag(fs, &db)
				return func(a *app, args []string) error { return a.slockState(db) }
			}},
		&command{group: "slock", name: "info", args: "", nargs: [2]int{0, 0},
			summary: "INFO: the server, its clients and every database's counts",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.slockInfo() }
			}},
		&command{group: "slock", name: "list", args: "", nargs: [2]int{0, 0},
			summary: "CALL LIST_LOCK: every locked key of a database",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var db uint8
				dbFlag(fs, &db)
				return func(a *app, args []string) error { return a.slockList(db) }
			}},
		&command{group: "slock", name: "locked", args: "KEY", nargs: [2]int{1, 1},
			summary: "CALL LIST_LOCKED: who holds KEY, with each holder's fencing token",
			help: `A key nobody holds prints "KEY: not held" and is a refusal (exit 2). The TOKEN column is each
holder's fencing token, read with TOKEN KEY LOCK_ID id on a Redis-text connection (see
'slock token'); it is left out, with a note on stderr, when the server gives no tokens or
KEY is a name of 16 bytes or more, which text commands name differently.`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var db uint8
				dbFlag(fs, &db)
				return func(a *app, args []string) error { return a.slockLocked(args[0], db) }
			}},
		&command{group: "slock", name: "waits", args: "KEY", nargs: [2]int{1, 1},
			summary: "CALL LIST_WAIT: who waits for KEY",
			help:    `A key nobody holds prints "KEY: not held" and is a refusal (exit 2).`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var db uint8
				dbFlag(fs, &db)
				return func(a *app, args []string) error { return a.slockWaits(args[0], db) }
			}},
		&command{group: "slock", name: "token", args: "KEY", nargs: [2]int{1, 1},
			summary: "TOKEN: the fencing token of KEY's holder",
			help: `Prints the fencing token of KEY's oldest holder, or with --lock-id of that holder: the
64-bit number its grant got, which only grows from grant to grant (cluster-wide, across
failovers and restarts). A write the lock protects carries it (SET key value FENCE token),
so that a holder whose lock has since been granted to another cannot overwrite the newer
holder's work. Prints the number alone; a key nobody holds (or --lock-id does not hold) is
a refusal (exit 2).

It is read with the Redis-text command TOKEN (binary frames have no room for 64 bits),
which names KEY as the text commands do: for names shorter than 16 bytes that is the key
the other slock commands name, for longer ones it is not (text names of 16 bytes or more
are hashed with the server's secret).`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				var lockID string
				var db uint8
				fs.StringVar(&lockID, "lock-id", "", "the holder whose token to print (default: the oldest)")
				dbFlag(fs, &db)
				return func(a *app, args []string) error { return a.slockToken(args[0], lockID, db) }
			}},
		&command{group: "slock", name: "ping", args: "", nargs: [2]int{0, 0},
			summary: "PING: checks that the server answers",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.slockPing() }
			}},
	)
}

// lockFields are a lock or unlock reply for --json and refusals.
func lockFields(key string, r *slock.Reply) map[string]any {
	return map[string]any{"key": key, "result": r.Result.String(), "lock_id": hex.EncodeToString(r.LockID[:]),
		"lcount": r.Lcount, "count": int(r.Count) + 1, "lrcount": r.Lrcount, "rcount": int(r.Rcount) + 1}
}

// lockLine is a lock or unlock reply for people.
func lockLine(key string, r *slock.Reply) string {
	return fmt.Sprintf("%s key=%s %s", r.Result, key, lockCounts(r))
}

func lockCounts(r *slock.Reply) string {
	return fmt.Sprintf("lock_id=%x lcount=%d count=%d lrcount=%d rcount=%d",
		r.LockID, r.Lcount, int(r.Count)+1, r.Lrcount, int(r.Rcount)+1)
}

// wireCount turns a maximum (1 = exclusive) into slock's Count/Rcount (max - 1).
func wireCount(n int) int {
	if n > 0 {
		return n - 1
	}
	return 0
}

func (a *app) slockLock(key string, o *lockOpts) error {
	timeout, tflag, wait, err := parseWait("timeout", o.timeout, false)
	if err != nil {
		return err
	}
	expried, eflag, _, err := parseWait("expired", o.expried, true)
	if err != nil {
		return err
	}
	if o.hold < 0 {
		return &usageError{msg: fmt.Sprintf("--hold %v is negative", o.hold)}
	}
	if o.db == 0xff {
		return &usageError{msg: "--db 255 is not a database (0-254)"}
	}
	s, err := a.dialSlock()
	if err != nil {
		return err
	}
	defer s.Close()
	f := slock.Frame{Type: slock.TypeLock, RequestID: s.newID(), Flag: o.flag, DB: o.db, Key: slock.TextID([]byte(key)),
		Timeout: timeout, TimeoutFlag: tflag | o.timeoutFlag, Expried: expried, ExpriedFlag: eflag | o.expriedFlag,
		Count: uint16(wireCount(int(o.count))), Rcount: uint8(wireCount(int(o.rcount)))}
	if o.lockID != "" {
		f.LockID = slock.TextID([]byte(o.lockID))
	} else {
		_, _ = rand.Read(f.LockID[:])
	}
	if err := s.send(slock.AppendLockRequest(nil, &f)); err != nil {
		return err
	}
	r, err := s.reply(slock.TypeLock, f.RequestID, wait)
	if err != nil {
		return err
	}
	fields := lockFields(key, &r)
	if r.Result != slock.ResultOK {
		return refuse(fields, "lock %s: %s (%s)", key, r.Result, lockCounts(&r))
	}
	line := lockLine(key, &r)
	if tokens, why := a.holderTokens(key, o.db, [][16]byte{f.LockID}); why == "" && tokens[0] != nil {
		fields["token"] = *tokens[0]
		line += " token=" + strconv.FormatUint(*tokens[0], 10)
	}
	if !a.json {
		fmt.Fprintln(a.stdout, line)
	}
	if o.hold == 0 {
		if a.json {
			fields["ok"] = true
			a.emitJSON(fields)
		}
		return nil
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "holding for %v (Ctrl-C unlocks now)\n", o.hold)
	}
	start := time.Now()
	interrupted, err := s.hold(a, o.hold, func() error {
		for {
			var p slock.Reply
			n, err := slock.ParseReply(s.buf[s.off:], maxReply, &p)
			if err != nil {
				return fmt.Errorf("%s: bad frame while holding: %w", s.what, err)
			}
			if n == 0 {
				return nil
			}
			s.off += n
			if p.Type == slock.TypeLock && p.RequestID == f.RequestID && p.Result == slock.ResultExpried {
				fields["result"] = p.Result.String()
				fields["held_seconds"] = time.Since(start).Seconds()
				return refuse(fields, "lock %s: EXPRIED after %v, before the hold ended", key, time.Since(start).Round(time.Millisecond))
			}
		}
	})
	if err != nil {
		return err
	}
	held := time.Since(start).Round(time.Millisecond)
	u := f
	u.Type, u.RequestID, u.Flag, u.Rcount = slock.TypeUnlock, s.newID(), 0, 0
	if err := s.send(slock.AppendLockRequest(nil, &u)); err != nil {
		return err
	}
	ur, err := s.reply(slock.TypeUnlock, u.RequestID, 0)
	if err != nil {
		return err
	}
	fields["unlock"], fields["held_seconds"], fields["interrupted"] = ur.Result.String(), held.Seconds(), interrupted
	if ur.Result != slock.ResultOK {
		return refuse(fields, "unlock %s after holding: %s (%s)", key, ur.Result, lockCounts(&ur))
	}
	if a.json {
		fields["ok"] = true
		a.emitJSON(fields)
	} else {
		how := ""
		if interrupted {
			how = ", interrupted"
		}
		fmt.Fprintf(a.stdout, "unlocked after %v%s: %s\n", held, how, lockLine(key, &ur))
	}
	return nil
}

func (a *app) slockUnlock(key string, o *lockOpts) error {
	flag := o.flag
	if o.first {
		flag |= 0x01
	}
	if o.lockID == "" && flag&0x01 == 0 {
		return &usageError{msg: "--lock-id is required (or --first to unlock the first holder)"}
	}
	if o.db == 0xff {
		return &usageError{msg: "--db 255 is not a database (0-254)"}
	}
	s, err := a.dialSlock()
	if err != nil {
		return err
	}
	defer s.Close()
	f := slock.Frame{Type: slock.TypeUnlock, RequestID: s.newID(), Flag: flag, DB: o.db, Key: slock.TextID([]byte(key)),
		Rcount: uint8(wireCount(int(o.rcount)))}
	if o.lockID != "" {
		f.LockID = slock.TextID([]byte(o.lockID))
	}
	if err := s.send(slock.AppendLockRequest(nil, &f)); err != nil {
		return err
	}
	r, err := s.reply(slock.TypeUnlock, f.RequestID, 0)
	if err != nil {
		return err
	}
	fields := lockFields(key, &r)
	if r.Result != slock.ResultOK {
		return refuse(fields, "unlock %s: %s (%s)", key, r.Result, lockCounts(&r))
	}
	if a.json {
		fields["ok"] = true
		a.emitJSON(fields)
	} else {
		fmt.Fprintln(a.stdout, lockLine(key, &r))
	}
	return nil
}

func (a *app) slockState(db uint8) error {
	s, err := a.dialSlock()
	if err != nil {
		return err
	}
	defer s.Close()
	id := s.newID()
	if err := s.send(slock.AppendStateRequest(nil, id, db)); err != nil {
		return err
	}
	r, err := s.reply(slock.TypeState, id, 0)
	if err != nil {
		return err
	}
	if r.Result != slock.ResultOK {
		return refuse(map[string]any{"result": r.Result.String()}, "state --db %d: %s", db, r.Result)
	}
	st := r.State
	items := []struct {
		name string
		v    uint64
	}{
		{"exists", uint64(st.DBState)}, {"keys", uint64(st.KeyCount)}, {"locked", uint64(st.LockedCount)},
		{"waiting", uint64(st.WaitCount)}, {"lock_count", st.LockCount}, {"unlock_count", st.UnlockCount},
		{"timeouted", uint64(st.TimeoutedCount)}, {"expired", uint64(st.ExpriedCount)},
		{"unlock_errors", uint64(st.UnlockErrorCount)},
	}
	if a.json {
		m := map[string]any{"ok": true, "db": db}
		for _, it := range items {
			m[it.name] = it.v
		}
		m["expried"] = m["expired"] // the old spelling, for scripts that read it
		a.emitJSON(m)
		return nil
	}
	fmt.Fprintf(a.stdout, "db %d", db)
	if st.DBState == 0 {
		fmt.Fprintf(a.stdout, " does not exist yet (no lock was ever taken in it)\n")
		return nil
	}
	fmt.Fprintln(a.stdout)
	for _, it := range items[1:] {
		fmt.Fprintf(a.stdout, "  %-13s %d\n", it.name, it.v)
	}
	return nil
}

func (a *app) slockPing() error {
	s, err := a.dialSlock()
	if err != nil {
		return err
	}
	defer s.Close()
	id := s.newID()
	start := time.Now()
	if err := s.send(slock.AppendPing(nil, id)); err != nil {
		return err
	}
	r, err := s.reply(slock.TypePing, id, 0)
	if err != nil {
		return err
	}
	if r.Result != slock.ResultOK {
		return refuse(map[string]any{"result": r.Result.String()}, "ping: %s", r.Result)
	}
	rtt := time.Since(start)
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "rtt_ms": float64(rtt.Microseconds()) / 1000})
	} else {
		fmt.Fprintf(a.stdout, "OK (%v)\n", rtt.Round(time.Microsecond))
	}
	return nil
}

// listLocks runs LIST_LOCK on db.
func (s *slockConn) listLocks(db uint8) ([]slock.ListLock, error) {
	body, err := s.call(fmt.Sprintf("list --db %d", db), slock.MethodListLock, slock.AppendListRequest(nil, uint32(db), nil))
	if err != nil {
		return nil, err
	}
	list, err := slock.ParseListLockResponse(body)
	if err != nil {
		return nil, fmt.Errorf("%s: LIST_LOCK reply: %w", s.what, err)
	}
	return list, nil
}

// valueText renders a key's value by its data flag.
func valueText(d *slock.LockData) string {
	if d == nil {
		return ""
	}
	switch slock.DataKind(uint8(d.Flag)) {
	case slock.KindNumber:
		return strconv.FormatInt(slock.Number(d.Value), 10)
	case slock.KindArray:
		var parts []string
		for e, rest, ok := slock.NextElem(d.Value); ok; e, rest, ok = slock.NextElem(rest) {
			parts = append(parts, show(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case slock.KindKV:
		var parts []string
		for k, v, rest, ok := slock.NextPair(d.Value); ok; k, v, rest, ok = slock.NextPair(rest) {
			parts = append(parts, show(k)+"="+show(v))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return show(d.Value)
}

func (a *app) slockList(db uint8) error {
	s, err := a.dialSlock()
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := s.listLocks(db)
	if err != nil {
		return err
	}
	sortStable(list, func(x, y slock.ListLock) bool { return x.LockedCount > y.LockedCount })
	if a.json {
		out := make([]map[string]any, 0, len(list))
		for _, l := range list {
			m := map[string]any{"key": keyText(l.Key), "key_hex": hex.EncodeToString(l.Key[:]), "levels": l.LockedCount}
			if l.Data != nil {
				m["value"] = valueText(l.Data)
			}
			out = append(out, m)
		}
		a.emitJSON(out)
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "no locked keys in db %d\n", db)
		return nil
	}
	rows := make([][]string, len(list))
	for i, l := range list {
		rows[i] = []string{keyText(l.Key), fmtInt(l.LockedCount), valueText(l.Data)}
	}
	return writeTable(a.stdout, []string{"KEY", "LEVELS", "VALUE"}, rows)
}

// untilText renders a Unix time as the time left from now.
func untilText(t uint64, now time.Time) string {
	if t >= 0x7fffffffffffffff {
		return "never"
	}
	d := time.Unix(int64(t), 0).Sub(now).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// keyListing runs the CALL method (LIST_LOCKED or LIST_WAIT) about key in db on a
// connection of its own, and returns the reply body and the server it came from.
func (a *app) keyListing(verb, method, key string, db uint8) (body []byte, server string, err error) {
	s, err := a.dialSlock()
	if err != nil {
		return nil, "", err
	}
	defer s.Close()
	body, err = s.call(verb+" "+key, method, slock.AppendListRequest(nil, uint32(db), keyBytes(key)))
	var r *refusal
	if errors.As(err, &r) && r.fields["result"] == slock.ResultUnknownDB.String() {
		// No holders (LOCK_MANAGER_ERROR), or a database nothing was ever locked in
		// (UNKNOWN_DB_ERROR): either way the key is not held.
		r.fields["key"], r.fields["held"] = key, false
		return nil, s.what, refuse(r.fields, "%s %s: not held", verb, key)
	}
	return body, s.what, err
}

func (a *app) slockLocked(key string, db uint8) error {
	body, server, err := a.keyListing("locked", slock.MethodListLocked, key, db)
	if err != nil {
		return err
	}
	r, err := slock.ParseListLockedResponse(body)
	if err != nil {
		return fmt.Errorf("%s: LIST_LOCKED reply: %w", server, err)
	}
	now := time.Now()
	ids := make([][16]byte, len(r.Locks))
	for i, l := range r.Locks {
		ids[i] = l.LockID
	}
	tokens, why := a.holderTokens(key, db, ids)
	if a.json {
		holders := make([]map[string]any, 0, len(r.Locks))
		for i, l := range r.Locks {
			h := map[string]any{"lock_id": hex.EncodeToString(l.LockID[:]), "levels": l.LockedCount,
				"expires": untilText(l.ExpriedTime, now), "count": int(l.Command.Count) + 1, "rcount": int(l.Command.Rcount) + 1}
			if why == "" && tokens[i] != nil {
				h["token"] = *tokens[i]
			}
			holders = append(holders, h)
		}
		m := map[string]any{"ok": true, "key": key, "levels": r.LockedCount, "holders": holders, "value": valueText(r.Data)}
		if why != "" {
			m["tokens_not_shown"] = why
		}
		a.emitJSON(m)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s: %d level(s) held by %d holder(s)", key, r.LockedCount, len(r.Locks))
	if r.Data != nil {
		fmt.Fprintf(a.stdout, ", value %s", valueText(r.Data))
	}
	fmt.Fprintln(a.stdout)
	head := []string{"LOCK_ID", "LEVELS", "EXPIRES_IN", "COUNT", "RCOUNT"}
	if why == "" {
		head = append(head, "TOKEN")
	} else {
		fmt.Fprintf(a.stderr, "tallyctl: fencing tokens not shown: %s\n", why)
	}
	rows := make([][]string, len(r.Locks))
	for i, l := range r.Locks {
		rows[i] = []string{keyText(l.LockID), fmtInt(l.LockedCount), untilText(l.ExpriedTime, now),
			fmtInt(int(l.Command.Count) + 1), fmtInt(int(l.Command.Rcount) + 1)}
		switch {
		case why != "":
		case tokens[i] == nil: // gone between the listing and TOKEN
			rows[i] = append(rows[i], "-")
		default:
			rows[i] = append(rows[i], strconv.FormatUint(*tokens[i], 10))
		}
	}
	return writeTable(a.stdout, head, rows)
}

// holderTokens reads the fencing tokens of key's holders ids in db, with TOKEN key LOCK_ID
// id on a Redis-text connection of its own: binary frames have no room for 64 bits. A nil
// token: that LockId no longer holds key. why, if not empty, says why there are none.
func (a *app) holderTokens(key string, db uint8, ids [][16]byte) (tokens []*uint64, why string) {
	if rediscmd.Hashed([]byte(key)) {
		return nil, "text commands (TOKEN) name keys of 16 bytes or more, or starting with a zero byte, differently"
	}
	r, err := a.tokenConn(db)
	if err != nil {
		return nil, err.Error()
	}
	defer r.Close()
	tokens = make([]*uint64, len(ids))
	for i, id := range ids {
		tok, held, err := r.token(key, id[:])
		if err != nil {
			return nil, err.Error()
		}
		if held {
			tokens[i] = &tok
		}
	}
	return tokens, ""
}

// tokenConn is a Redis-text connection to the slock port with db selected, for TOKEN.
func (a *app) tokenConn(db uint8) (*respConn, error) {
	r, err := a.dialRESP()
	if err != nil {
		return nil, err
	}
	if db != 0 {
		rep, err := r.do("SELECT", strconv.Itoa(int(db)))
		if err == nil && rep.Kind == '-' {
			err = refuse(map[string]any{"reply": string(rep.Str)}, "SELECT %d: %s", db, rep.Str)
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// token runs TOKEN key [LOCK_ID id]: the token, or held false when nobody (or not id)
// holds key. An error reply is a refusal.
func (r *respConn) token(key string, id []byte) (tok uint64, held bool, err error) {
	args := []string{"TOKEN", key}
	if id != nil {
		args = append(args, "LOCK_ID", hex.EncodeToString(id))
	}
	rep, err := r.do(args...)
	switch {
	case err != nil:
		return 0, false, err
	case rep.Kind == '-':
		return 0, false, refuse(map[string]any{"reply": string(rep.Str)}, "token %s: %s", key, rep.Str)
	case rep.Null:
		return 0, false, nil
	case rep.Kind == ':' && rep.Int >= 0:
		return uint64(rep.Int), true, nil
	}
	return 0, false, fmt.Errorf("%s: TOKEN reply of type %q, want an integer", r.what, rep.Kind)
}

func (a *app) slockToken(key, lockID string, db uint8) error {
	if db == 0xff {
		return &usageError{msg: "--db 255 is not a database (0-254)"}
	}
	r, err := a.tokenConn(db)
	if err != nil {
		return err
	}
	defer r.Close()
	var id []byte
	if lockID != "" {
		b := slock.TextID([]byte(lockID))
		id = b[:]
	}
	tok, held, err := r.token(key, id)
	if err != nil {
		return err
	}
	if !held {
		who := "nobody holds it"
		if id != nil {
			who = "--lock-id " + lockID + " does not hold it"
		}
		return refuse(map[string]any{"key": key, "held": false}, "token %s: %s", key, who)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "key": key, "token": tok})
	} else {
		fmt.Fprintln(a.stdout, tok)
	}
	return nil
}

func (a *app) slockWaits(key string, db uint8) error {
	body, server, err := a.keyListing("waits", slock.MethodListWait, key, db)
	if err != nil {
		return err
	}
	r, err := slock.ParseListWaitResponse(body)
	if err != nil {
		return fmt.Errorf("%s: LIST_WAIT reply: %w", server, err)
	}
	now := time.Now()
	if a.json {
		waits := make([]map[string]any, 0, len(r.Waits))
		for _, w := range r.Waits {
			waits = append(waits, map[string]any{"lock_id": hex.EncodeToString(w.LockID[:]),
				"times_out": untilText(w.TimeoutTime, now), "count": int(w.Command.Count) + 1})
		}
		a.emitJSON(map[string]any{"ok": true, "key": key, "levels": r.LockedCount, "waiters": waits})
		return nil
	}
	fmt.Fprintf(a.stdout, "%s: %d level(s) held, %d waiter(s)\n", key, r.LockedCount, len(r.Waits))
	if len(r.Waits) == 0 {
		return nil
	}
	rows := make([][]string, len(r.Waits))
	for i, w := range r.Waits {
		rows[i] = []string{keyText(w.LockID), untilText(w.TimeoutTime, now), fmtInt(int(w.Command.Count) + 1)}
	}
	return writeTable(a.stdout, []string{"LOCK_ID", "TIMES_OUT_IN", "COUNT"}, rows)
}
