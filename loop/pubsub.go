package loop

import (
	"bytes"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// This file is pub/sub on the slock port's Redis-text side, as Redis 7.0 serves it over
// RESP2: its state and delivery; its commands are in pubsub_cmd.go, keyspace notifications
// (notify-keyspace-events) in notify.go, its settings in pubsub_config.go. A message is
// rendered once per channel or pattern and appended to each subscriber's output with put, so
// it goes out behind the log write of the change it reports (persist.go), as a reply would.

// pubsub is the loop's channels and patterns, with their subscribers, as Redis's pubsub.c
// owns its dicts: Server holds one (Server.ps) and calls its entry points (subscribe,
// publish, over, closed, leavingStep, notify*, configSet, command). It reaches the loop only
// through psHost.
type pubsub struct {
	h     psHost          // the output path and the cluster's role
	log   *zerolog.Logger // the loop's
	cfg   *Config         // the bounds on subscriptions
	locks *store.Locks    // KeepGone follows the expiry and lock classes
	// limit is client-output-buffer-limit's pubsub class, as CONFIG SET left it.
	limit    PubsubLimit
	obuf     [3]PubsubLimit        // client-output-buffer-limit's normal and slave classes, shown only
	channels map[string]*psChannel // channels with at least one subscriber
	patterns []*psPattern          // distinct patterns, in the order of their first subscription; some dead
	patIdx   map[string]*psPattern // the live ones, by pattern
	patDead  int                   // dead entries of patterns, dropped at the next subscribe once many
	patSeq   uint64                // the last psPattern.seq given
	notify   notifyFlags           // notify-keyspace-events
	msg      []byte                // the message being delivered, rendered once
	ch       []byte                // a notification's channel name, built here
	ev       []byte                // a notification's event name
	name     []byte                // a lock key's name (lockKeyName)
	received uint64                // messages delivered to subscribers, for metrics
	cut      uint64                // subscribers closed over client-output-buffer-limit pubsub
	muted    map[watchKey]struct{} // keys a command deleted by a time past: their expiry is its event
	relay    []byte                // cluster leader: the messages published since the last proposal, as records
	leaving  []*conn               // closed connections whose many channels are being ended, a slice per turn
}

// psChannel is a channel and its subscribers, in subscription order.
type psChannel struct {
	name string
	subs []*conn
}

// psPattern is a pattern and its subscribers. A pattern nobody subscribes to any more is
// dead: out of patIdx, skipped, and dropped from patterns at a later subscribe, so that
// subscribing and unsubscribing cost the same whatever the number of patterns.
type psPattern struct {
	pat    []byte
	prefix int    // the bytes of pat before its first special character (* ? [ \): compared first
	seq    uint64 // increasing along ps.patterns: where a PUBLISH across turns goes on
	subs   []*conn
	dead   bool
}

// connSubs is one connection's subscriptions; while it has any, it is in subscribed mode.
type connSubs struct {
	channels map[string]struct{}
	patterns []string       // in subscription order, as Redis keeps them; some dead (not in patPos)
	patPos   map[string]int // each live pattern's place in patterns
	softAt   int64          // nanotime its output went over the pubsub soft limit (0: under it)
}

func (cs *connSubs) count() int {
	if cs == nil {
		return 0
	}
	return len(cs.channels) + len(cs.patPos)
}

// livePattern reports whether cs.patterns[i] is a live subscription.
func (cs *connSubs) livePattern(i int) bool {
	j, ok := cs.patPos[cs.patterns[i]]
	return ok && j == i
}

// DefaultMaxSubscriptions is how many channels and patterns one connection may subscribe
// to, together (--max-subscriptions).
const DefaultMaxSubscriptions = 100_000

// The bounds on what a PUBLISH costs (issue 30, item 5: 20,000 patterns and a 100 KB channel
// held the loop 6.1 s in one PUBLISH). A PUBLISH tests the channel against every distinct
// pattern, each test at most (channel bytes) x (pattern bytes) steps (rediscmd.Match), so:
// distinct patterns in all (--max-patterns), patterns of one connection
// (--max-client-patterns), the bytes of a pattern (--max-pattern-length) and of a channel a
// client names (--max-channel-length). A client's PUBLISH also goes on across turns when its
// tests outlast its slice (publishStep).
const (
	DefaultMaxPatterns       = 10_000
	DefaultMaxClientPatterns = 1_000
	DefaultMaxPatternLen     = 256
	DefaultMaxChannelLen     = 1024
)

// PubsubLimit is Redis's client-output-buffer-limit for the pubsub class: a subscriber whose
// unsent output passes Hard is closed at once, one that stays past Soft for SoftFor is closed
// then (0 turns either off).
type PubsubLimit struct {
	Hard, Soft int64
	SoftFor    time.Duration
}

// DefaultPubsubLimit is Redis's default: 32 MB hard, 8 MB for 60 seconds.
var DefaultPubsubLimit = PubsubLimit{Hard: 32 << 20, Soft: 8 << 20, SoftFor: 60 * time.Second}

// psHost is what pub/sub needs of the loop: a connection's output buffer and its return (the
// one output path, output.go), a message pushed to subscribers (closing one that does not
// read), a turn of the pump for the channels of closed subscribers, and which part the loop
// plays in a cluster. Server is it; no call allocates.
type psHost interface {
	out(cs *conn) []byte
	put(cs *conn, b []byte)
	pushAll(subs []*conn, m []byte) (open int)
	poke()
	pubsubRole() psRole
}

// psRole is the part a member plays for pub/sub: a single node publishes to its own
// subscribers; a cluster's leader also relays every message to the other members in its
// entries; a follower publishes only what the leader's entries carry.
type psRole uint8

const (
	psSingle psRole = iota
	psLeader
	psFollower
)

// pubsubRole is the one place pub/sub asks whether the loop is in a cluster.
func (s *Server) pubsubRole() psRole {
	switch {
	case s.cl == nil:
		return psSingle
	case s.cl.isLeader():
		return psLeader
	}
	return psFollower
}

// init gives ps its host and what it reads of the configuration.
func (ps *pubsub) init(s *Server, notify notifyFlags) {
	ps.h, ps.log, ps.cfg, ps.locks = s, &s.log, &s.cfg, s.st.locks
	ps.notify, ps.limit = notify, s.cfg.PubsubLimit
	ps.obuf[1] = PubsubLimit{Hard: 256 << 20, Soft: 64 << 20, SoftFor: 60 * time.Second} // Redis's default, shown only
	ps.locks.KeepGone = notify&(nExpired|nLock) != 0
}

// relayOut keeps a message a cluster's leader publishes for the next proposal: every member
// publishes it (relayed).
func (ps *pubsub) relayOut(ch, msg []byte) {
	if ps.h.pubsubRole() == psLeader {
		ps.relay = aof.AppendMessage(ps.relay, ch, msg)
	}
}

// subscribed reports whether cs is in subscribed mode.
func (sc *slockConn) subscribed() bool { return sc.subs.count() > 0 }

// Channel lists and counts for INFO.
func (ps *pubsub) pubsubCounts() (channels, patterns int) {
	return len(ps.channels), len(ps.patIdx)
}

// literalPrefix is how many bytes of pattern come before its first special character.
func literalPrefix(pattern []byte) int {
	if i := bytes.IndexAny(pattern, "*?[\\"); i >= 0 {
		return i
	}
	return len(pattern)
}

// matches reports whether channel ch matches live pattern p: its literal prefix first (a
// comparison), then the rest (rediscmd.Match).
func (p *psPattern) matches(ch []byte) bool {
	return !p.dead && len(ch) >= p.prefix && bytes.Equal(ch[:p.prefix], p.pat[:p.prefix]) &&
		rediscmd.Match(p.pat[p.prefix:], ch[p.prefix:])
}

// compactAfter is how many dead entries a pattern list keeps before it is compacted (once
// they also outnumber the live ones): compaction is then amortised over the removals.
const compactAfter = 64

// addSub subscribes cs to channel (or pattern) n, which it is not subscribed to yet.
func (ps *pubsub) addSub(cs *conn, n []byte, pattern bool) {
	subs := cs.slock.subs
	name := string(n)
	if !pattern {
		if subs.channels == nil {
			subs.channels = make(map[string]struct{})
		}
		subs.channels[name] = struct{}{}
		if ps.channels == nil {
			ps.channels = make(map[string]*psChannel)
		}
		c := ps.channels[name]
		if c == nil {
			c = &psChannel{name: name}
			ps.channels[name] = c
		}
		c.subs = append(c.subs, cs)
		return
	}
	if subs.patPos == nil {
		subs.patPos = make(map[string]int)
	}
	if dead := len(subs.patterns) - len(subs.patPos); dead > compactAfter && dead > len(subs.patPos) {
		live := subs.patterns[:0]
		for i, p := range subs.patterns {
			if subs.livePattern(i) {
				subs.patPos[p] = len(live)
				live = append(live, p)
			}
		}
		clear(subs.patterns[len(live):])
		subs.patterns = live
	}
	subs.patPos[name] = len(subs.patterns)
	subs.patterns = append(subs.patterns, name)
	p := ps.patIdx[name]
	if p == nil {
		if ps.patDead > compactAfter && ps.patDead > len(ps.patIdx) {
			live := ps.patterns[:0]
			for _, q := range ps.patterns {
				if !q.dead {
					live = append(live, q)
				}
			}
			clear(ps.patterns[len(live):])
			ps.patterns, ps.patDead = live, 0
		}
		if ps.patIdx == nil {
			ps.patIdx = make(map[string]*psPattern)
		}
		ps.patSeq++
		p = &psPattern{pat: []byte(name), prefix: literalPrefix(n), seq: ps.patSeq}
		ps.patIdx[name] = p
		ps.patterns = append(ps.patterns, p)
	}
	p.subs = append(p.subs, cs)
}

// removeSub unsubscribes cs from channel (or pattern) n, if it is subscribed.
func (ps *pubsub) removeSub(cs *conn, n string, pattern bool) {
	subs := cs.slock.subs
	if subs == nil {
		return
	}
	if !pattern {
		if _, ok := subs.channels[n]; !ok {
			return
		}
		delete(subs.channels, n)
		c := ps.channels[n]
		if c == nil {
			return
		}
		c.subs = dropConn(c.subs, cs)
		if len(c.subs) == 0 {
			delete(ps.channels, n)
		}
		return
	}
	i, ok := subs.patPos[n]
	if !ok {
		return
	}
	delete(subs.patPos, n)
	subs.patterns[i] = ""
	if len(subs.patPos) == 0 {
		clear(subs.patterns)
		subs.patterns = subs.patterns[:0]
	}
	p := ps.patIdx[n]
	if p == nil {
		return
	}
	p.subs = dropConn(p.subs, cs)
	if len(p.subs) == 0 {
		p.dead = true
		delete(ps.patIdx, n)
		ps.patDead++
	}
}

// dropConn removes cs from subs, keeping the order of the others.
func dropConn(subs []*conn, cs *conn) []*conn {
	for i, c := range subs {
		if c == cs {
			copy(subs[i:], subs[i+1:])
			subs[len(subs)-1] = nil
			return subs[:len(subs)-1]
		}
	}
	return subs
}

// unsubscribeAll ends every subscription of cs, answering nothing (its close, RESET).
func (ps *pubsub) unsubscribeAll(cs *conn) {
	subs := cs.slock.subs
	if subs == nil {
		return
	}
	ps.unsubscribePatterns(cs)
	for c := range subs.channels {
		ps.removeSub(cs, c, false)
	}
	cs.slock.subs = nil
}

// unsubscribePatterns ends every pattern subscription of cs (--max-client-patterns of them
// at most).
func (ps *pubsub) unsubscribePatterns(cs *conn) {
	subs := cs.slock.subs
	for i := 0; i < len(subs.patterns); i++ {
		if subs.livePattern(i) {
			ps.removeSub(cs, subs.patterns[i], true)
		}
	}
}

// closed ends the subscriptions of cs, which is closed: its patterns at once, its
// channels too when they are few, else a slice per turn (leavingStep): 100,000
// channels are tens of milliseconds (sliced: the loop slices cs's turns, fair.go). Meanwhile
// nothing is delivered to it (pushAll skips a closed connection) nor counted as a receiver.
func (ps *pubsub) closed(cs *conn, sliced bool) {
	subs := cs.slock.subs
	if subs == nil {
		return
	}
	if len(subs.channels) <= unsubscribeStep || !sliced {
		ps.unsubscribeAll(cs)
		return
	}
	ps.unsubscribePatterns(cs)
	ps.leaving = append(ps.leaving, cs)
	ps.h.poke()
}

// leavingStep ends channels of closed connections (closed) for one slice of the loop's time
// (slice ns), and has the pump come back for more at the next turn; ticks run it too.
func (ps *pubsub) leavingStep(slice int64) {
	if len(ps.leaving) == 0 {
		return
	}
	start := nanotime()
	for len(ps.leaving) > 0 {
		cs := ps.leaving[0]
		subs := cs.slock.subs
		k := 0
		for c := range subs.channels {
			if k == unsubscribeStep {
				break
			}
			ps.removeSub(cs, c, false)
			k++
		}
		if len(subs.channels) == 0 {
			cs.slock.subs = nil
			ps.leaving[0] = nil
			ps.leaving = ps.leaving[1:]
		}
		if nanotime()-start >= slice && len(ps.leaving) > 0 {
			ps.h.poke() // on the pump's next turn, after the connections ready now
			return
		}
	}
	ps.leaving = nil
}

// publish delivers msg on channel ch to its subscribers, then to the subscribers of each
// pattern that matches it (each pattern is matched once); it returns how many received it.
// The work is the patterns (each test: the channel's bytes, at most times the pattern's) plus
// the receivers; a channel's message is rendered once. It runs whole: keyspace
// notifications, EXEC, scripts and a member's relayed messages come here.
func (ps *pubsub) publish(ch, msg []byte) int {
	ps.relayOut(ch, msg)
	n := ps.deliver(ch, msg, nil)
	for _, p := range ps.patterns {
		if !p.matches(ch) {
			continue
		}
		ps.msg = appendPMessage(ps.msg[:0], p.pat, ch, msg)
		ps.h.pushAll(p.subs, ps.msg)
		n += len(p.subs)
		ps.received += uint64(len(p.subs))
	}
	return n
}

// deliver delivers msg on channel ch to its subscribers, then to those of each live pattern
// of matched; it returns how many received it.
func (ps *pubsub) deliver(ch, msg []byte, matched []*psPattern) int {
	n := 0
	if c := ps.channels[string(ch)]; c != nil {
		ps.msg = appendMessage(ps.msg[:0], ch, msg)
		n += ps.h.pushAll(c.subs, ps.msg)
	}
	for _, p := range matched {
		if p.dead {
			continue
		}
		ps.msg = appendPMessage(ps.msg[:0], p.pat, ch, msg)
		ps.h.pushAll(p.subs, ps.msg)
		n += len(p.subs)
	}
	ps.received += uint64(n)
	return n
}

// appendMessage renders a message push: message, the channel, the message.
func appendMessage(b, ch, msg []byte) []byte {
	b = append(b, "*3\r\n$7\r\nmessage\r\n"...)
	return resp.AppendBulk(resp.AppendBulk(b, ch), msg)
}

// appendPMessage renders a pattern's message push: pmessage, the pattern, the channel, the
// message.
func appendPMessage(b, pat, ch, msg []byte) []byte {
	b = append(b, "*4\r\n$8\r\npmessage\r\n"...)
	return resp.AppendBulk(resp.AppendBulk(resp.AppendBulk(b, pat), ch), msg)
}

// pushAll appends a rendered message to the output of each of subs that is open (one call of
// the host a channel or pattern, the loop over its subscribers static: a call through psHost
// per subscriber cost PUBLISH to 1,000 a third more); it returns how many are not closed (a
// closed one's channels are being ended, pubsub.closed).
func (s *Server) pushAll(subs []*conn, m []byte) (open int) {
	for _, cs := range subs {
		if !cs.closed {
			s.push(cs, m)
			open++
		}
	}
	return open
}

// push appends a rendered message to a subscriber's output, and closes the subscriber once
// its unsent output passes the pubsub hard limit (or has stayed past the soft limit too long).
func (s *Server) push(cs *conn, m []byte) {
	if cs.closing {
		return
	}
	b := s.out(cs)
	b = append(b, m...)
	s.put(cs, b)
	if s.ps.over(cs) {
		s.closeLater(cs)
	}
}

// over reports whether subscriber cs is over the pubsub class of
// client-output-buffer-limit and must be closed (and logs it): its unsent output (its
// buffer and what gnet still holds) past the hard limit, or past the soft limit for longer
// than its time.
func (ps *pubsub) over(cs *conn) bool {
	subs := cs.slock.subs
	if subs == nil || cs.closing {
		return false // (closing: cut already, and logged once)
	}
	lim := ps.limit
	unsent := int64(len(cs.out) + cs.sent)
	why := ""
	switch {
	case lim.Hard > 0 && unsent > lim.Hard:
		why = "hard"
	case lim.Soft > 0 && unsent > lim.Soft:
		now := nanotime()
		if subs.softAt == 0 {
			subs.softAt = now
		}
		if time.Duration(now-subs.softAt) >= lim.SoftFor {
			why = "soft"
		}
	default:
		subs.softAt = 0
	}
	if why == "" {
		return false
	}
	ps.log.Warn().Uint64("conn", uint64(cs.owner)).Str("remote", remoteAddr(cs.c).String()).
		Int64("unsent", unsent).Int64("hard", lim.Hard).Int64("soft", lim.Soft).Float64("soft_seconds", lim.SoftFor.Seconds()).
		Str("limit", why).Msg("closing subscriber: over client-output-buffer-limit pubsub (it does not read its messages)")
	ps.cut++
	return true
}

// maxRelayBuf is the largest relay buffer kept between proposals.
const maxRelayBuf = 1 << 20

// relayed publishes a message a committed raft entry carries: one the leader published (a
// PUBLISH, a keyspace notification) when it made the entry's changes. The leader does not
// apply its own entries, so each member publishes each message once.
func (s *Server) relayed(ch, msg []byte) {
	s.ps.publish(ch, msg)
}
