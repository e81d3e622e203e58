package loop

import (
	"bytes"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// This file is pub/sub on the slock port's Redis-text side, as Redis 7.0 serves it over
// RESP2: SUBSCRIBE, PSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, PUBSUB, the subscribed mode,
// and keyspace notifications (notify-keyspace-events). A message is rendered once per
// channel or pattern and appended to each subscriber's output with put, so it goes out
// behind the log write of the change it reports (persist.go), as a reply would.

// pubsubState is the loop's channels and patterns, with their subscribers.
type pubsubState struct {
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

// subscribed reports whether cs is in subscribed mode.
func (sc *slockConn) subscribed() bool { return sc.subs.count() > 0 }

// Channel lists and counts for INFO.
func (ps *pubsubState) pubsubCounts() (channels, patterns int) {
	return len(ps.channels), len(ps.patIdx)
}

// subscribedAllows reports whether spec may run in subscribed mode (RESP2), as Redis 7.0.
func subscribedAllows(spec *rediscmd.Spec) bool {
	switch spec.Cmd {
	case rediscmd.CmdSubscribe, rediscmd.CmdUnsubscribe, rediscmd.CmdPSubscribe, rediscmd.CmdPUnsubscribe,
		rediscmd.CmdPing, rediscmd.CmdQuit, rediscmd.CmdReset:
		return true
	}
	return false
}

// subscribedError answers a command refused in subscribed mode with Redis 7.0's error.
func (s *Server) subscribedError(cs *conn, spec *rediscmd.Spec, args [][]byte) {
	name := strings.ToLower(spec.Name)
	if len(spec.Subs) > 0 && len(args) > 1 {
		name += "|" + strings.ToLower(string(args[1]))
	}
	s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR Can't execute '"+name+
		"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
}

// appendSubReply appends a subscribe-family confirmation: kind, the channel or pattern (nil:
// none), and the connection's subscription count.
func appendSubReply(b []byte, kind string, name []byte, n int) []byte {
	b = resp.AppendArray(b, 3)
	b = resp.AppendBulkString(b, kind)
	if name == nil {
		b = resp.AppendNull(b)
	} else {
		b = resp.AppendBulk(b, name)
	}
	return resp.AppendInt(b, int64(n))
}

// subscribe answers SUBSCRIBE channel... (pattern: PSUBSCRIBE pattern...).
func (s *Server) subscribe(cs *conn, names [][]byte, pattern bool) {
	sc := cs.slock
	if sc.subs == nil {
		sc.subs = &connSubs{}
	}
	kind := "subscribe"
	if pattern {
		kind = "psubscribe"
	}
	b := s.scratchFor(cs)
	for _, n := range names {
		if !s.hasSub(cs, n, pattern) {
			if why := s.subRefused(cs, n, pattern); why != "" {
				b = resp.AppendError(b, why+": not subscribed to '"+clip(n)+"'")
				continue
			}
			s.ps.addSub(cs, n, pattern)
		}
		b = appendSubReply(b, kind, n, sc.subs.count())
	}
	s.sendTo(cs, b)
}

// subRefused is the error (without its end) for a subscription of cs to channel (or
// pattern) n past a bound, "" when it is within them all.
func (s *Server) subRefused(cs *conn, n []byte, pattern bool) string {
	cfg := &s.cfg
	subs := cs.slock.subs
	switch {
	case subs.count() >= cfg.MaxSubscriptions:
		return "ERR max subscriptions per connection reached (" + strconv.Itoa(cfg.MaxSubscriptions) + ", --max-subscriptions)"
	case !pattern && len(n) > cfg.MaxChannelLen:
		return "ERR channel too long (" + strconv.Itoa(len(n)) + " bytes, --max-channel-length " + strconv.Itoa(cfg.MaxChannelLen) + ")"
	case pattern && len(n) > cfg.MaxPatternLen:
		return "ERR pattern too long (" + strconv.Itoa(len(n)) + " bytes, --max-pattern-length " + strconv.Itoa(cfg.MaxPatternLen) + ")"
	case pattern && len(subs.patPos) >= cfg.MaxClientPatterns:
		return "ERR max patterns per connection reached (" + strconv.Itoa(cfg.MaxClientPatterns) + ", --max-client-patterns)"
	case pattern && s.ps.patIdx[string(n)] == nil && len(s.ps.patIdx) >= cfg.MaxPatterns:
		return "ERR max patterns reached (" + strconv.Itoa(cfg.MaxPatterns) + " distinct patterns of all clients, --max-patterns)"
	}
	return ""
}

// unsubscribeStep is how many subscriptions an UNSUBSCRIBE or PUNSUBSCRIBE of all ends in a
// step (about 200 ns each, with its reply).
const unsubscribeStep = 256

// unsubscribe answers UNSUBSCRIBE [channel...] (pattern: PUNSUBSCRIBE [pattern...]); no names
// means every one, and with none subscribed one reply with a null name. Every one, when
// there are many, goes on across turns (unsubscribeAllStep): 100,000 channels took 125 ms.
func (s *Server) unsubscribe(cs *conn, names [][]byte, pattern bool) {
	sc := cs.slock
	kind := "unsubscribe"
	if pattern {
		kind = "punsubscribe"
	}
	b := s.scratchFor(cs)
	if len(names) == 0 {
		all := 0
		if subs := sc.subs; subs != nil && pattern {
			all = len(subs.patPos)
		} else if subs != nil {
			all = len(subs.channels)
		}
		if all == 0 {
			s.sendTo(cs, appendSubReply(b, kind, nil, sc.subs.count()))
			return
		}
		if all > unsubscribeStep && !s.runsWhole(cs) {
			c := s.contBegin(cs, contUnsubscribe)
			c.unsubPat = pattern
			s.contStep(cs, c, 0)
			c.suspend(sc.req.Args)
			return
		}
		for _, n := range s.subNames(cs, pattern) {
			s.ps.removeSub(cs, string(n), pattern)
			b = appendSubReply(b, kind, n, sc.subs.count())
		}
		s.sendTo(cs, b)
		return
	}
	for _, n := range names {
		s.ps.removeSub(cs, string(n), pattern)
		b = appendSubReply(b, kind, n, sc.subs.count())
	}
	s.sendTo(cs, b)
}

// unsubscribeAllStep ends the next unsubscribeStep subscriptions of an UNSUBSCRIBE (or
// PUNSUBSCRIBE) of all, answering each; the last step ends the command. The connection's
// own later commands wait behind it, so nothing else changes its subscriptions meanwhile.
func (s *Server) unsubscribeAllStep(cs *conn, c *textCont) {
	subs := cs.slock.subs
	b := s.scratchFor(cs)
	k := 0
	done := true
	if subs != nil && c.unsubPat {
		for ; c.next < len(subs.patterns) && k < unsubscribeStep; c.next++ {
			if !subs.livePattern(c.next) {
				continue
			}
			name := subs.patterns[c.next]
			s.ps.removeSub(cs, name, true)
			b = appendSubReplyString(b, "punsubscribe", name, subs.count())
			k++
		}
		done = c.next >= len(subs.patterns)
	} else if subs != nil {
		for name := range subs.channels {
			if k == unsubscribeStep {
				break
			}
			s.ps.removeSub(cs, name, false)
			b = appendSubReplyString(b, "unsubscribe", name, subs.count())
			k++
		}
		done = len(subs.channels) == 0
	}
	s.sendTo(cs, b)
	if done {
		c.active = false
	}
}

// appendSubReplyString is appendSubReply for a name held as a string.
func appendSubReplyString(b []byte, kind, name string, n int) []byte {
	b = resp.AppendArray(b, 3)
	b = resp.AppendBulkString(b, kind)
	b = resp.AppendBulkString(b, name)
	return resp.AppendInt(b, int64(n))
}

// subNames lists cs's channels (or patterns), copied.
func (s *Server) subNames(cs *conn, pattern bool) [][]byte {
	subs := cs.slock.subs
	if subs == nil {
		return nil
	}
	var out [][]byte
	if pattern {
		for i, p := range subs.patterns {
			if subs.livePattern(i) {
				out = append(out, []byte(p))
			}
		}
		return out
	}
	for c := range subs.channels {
		out = append(out, []byte(c))
	}
	return out
}

// hasSub reports whether cs is subscribed to channel (or pattern) n.
func (s *Server) hasSub(cs *conn, n []byte, pattern bool) bool {
	subs := cs.slock.subs
	if subs == nil {
		return false
	}
	if !pattern {
		_, ok := subs.channels[string(n)]
		return ok
	}
	_, ok := subs.patPos[string(n)]
	return ok
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
func (ps *pubsubState) addSub(cs *conn, n []byte, pattern bool) {
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
func (ps *pubsubState) removeSub(cs *conn, n string, pattern bool) {
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
func (s *Server) unsubscribeAll(cs *conn) {
	subs := cs.slock.subs
	if subs == nil {
		return
	}
	s.unsubscribePatterns(cs)
	for c := range subs.channels {
		s.ps.removeSub(cs, c, false)
	}
	cs.slock.subs = nil
}

// unsubscribePatterns ends every pattern subscription of cs (--max-client-patterns of them
// at most).
func (s *Server) unsubscribePatterns(cs *conn) {
	subs := cs.slock.subs
	for i := 0; i < len(subs.patterns); i++ {
		if subs.livePattern(i) {
			s.ps.removeSub(cs, subs.patterns[i], true)
		}
	}
}

// unsubscribeClosed ends the subscriptions of cs, which is closed: its patterns at once, its
// channels too when they are few, else a slice per turn (unsubscribeLeaving): 100,000
// channels are tens of milliseconds. Meanwhile nothing is delivered to it (push skips a closed
// connection) nor counted as a receiver.
func (s *Server) unsubscribeClosed(cs *conn) {
	subs := cs.slock.subs
	if subs == nil {
		return
	}
	if len(subs.channels) <= unsubscribeStep || !s.fair.sliced(cs) {
		s.unsubscribeAll(cs)
		return
	}
	s.unsubscribePatterns(cs)
	s.ps.leaving = append(s.ps.leaving, cs)
	s.poke()
}

// unsubscribeLeaving ends channels of closed connections (unsubscribeClosed) for one slice of
// the loop's time, and has the pump come back for more at the next turn; ticks run it too.
func (s *Server) unsubscribeLeaving() {
	if len(s.ps.leaving) == 0 {
		return
	}
	start := nanotime()
	slice := max(s.fair.slice, int64(DefaultConnSlice))
	for len(s.ps.leaving) > 0 {
		cs := s.ps.leaving[0]
		subs := cs.slock.subs
		k := 0
		for c := range subs.channels {
			if k == unsubscribeStep {
				break
			}
			s.ps.removeSub(cs, c, false)
			k++
		}
		if len(subs.channels) == 0 {
			cs.slock.subs = nil
			s.ps.leaving[0] = nil
			s.ps.leaving = s.ps.leaving[1:]
		}
		if nanotime()-start >= slice && len(s.ps.leaving) > 0 {
			s.poke() // on the pump's next turn, after the connections ready now
			return
		}
	}
	s.ps.leaving = nil
}

// publishCmd answers PUBLISH channel message: how many subscriptions received it. A
// channel longer than --max-channel-length is refused. Outside EXEC, when testing the
// patterns outlasts the connection's slice, it goes on across turns (publishStep).
func (s *Server) publishCmd(cs *conn, ch, msg []byte) {
	if len(ch) > s.cfg.MaxChannelLen {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR channel too long ("+strconv.Itoa(len(ch))+
			" bytes, --max-channel-length "+strconv.Itoa(s.cfg.MaxChannelLen)+")"))
		return
	}
	if len(s.ps.patIdx) == 0 || s.runsWhole(cs) {
		n := s.publish(ch, msg)
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(n)))
		return
	}
	if s.cl != nil && s.cl.isLeader() {
		s.ps.relay = aof.AppendMessage(s.ps.relay, ch, msg) // every member publishes it (relayed)
	}
	c := s.contBegin(cs, contPublish)
	c.pubCh, c.pubMsg = ch, msg
	s.contStep(cs, c, 0)
	if c.active { // the request's bytes are gone once the turn is over: copies
		c.keys = append(append(c.keys[:0], ch...), msg...)
		c.pubCh, c.pubMsg = c.keys[:len(ch)], c.keys[len(ch):]
		c.suspend(cs.slock.req.Args)
	}
}

// publishStep tests the channel of a client's PUBLISH against the next patterns, from the
// one after the last tested (by seq: subscriptions may come and go between turns); the last
// step delivers the message, to the channel's subscribers then to those of each pattern it
// matched that is still subscribed, all at once as Redis's PUBLISH, and answers. A pattern
// subscribed while the PUBLISH goes on is tested too: the PUBLISH is as of its last step.
func (s *Server) publishStep(cs *conn, c *textCont) {
	ps := &s.ps
	i := sort.Search(len(ps.patterns), func(i int) bool { return ps.patterns[i].seq > c.seq })
	every := 16 // patterns between two looks at the slice: a test costs about the channel's bytes
	if len(c.pubCh) > 256 {
		every = 1
	}
	for k := 0; i < len(ps.patterns); i++ {
		p := ps.patterns[i]
		c.seq = p.seq
		if p.matches(c.pubCh) {
			c.matched = append(c.matched, p)
		}
		if k++; k == every && i+1 < len(ps.patterns) {
			return
		}
	}
	n := s.deliver(c.pubCh, c.pubMsg, c.matched)
	clear(c.matched)
	c.active, c.matched, c.pubCh, c.pubMsg = false, c.matched[:0], nil, nil
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(n)))
	s.contRelease(c)
}

// publish delivers msg on channel ch to its subscribers, then to the subscribers of each
// pattern that matches it (each pattern is matched once); it returns how many received it.
// The work is the patterns (each test: the channel's bytes, at most times the pattern's) plus
// the receivers; a channel's message is rendered once. It runs whole: keyspace
// notifications, EXEC, scripts and a member's relayed messages come here.
func (s *Server) publish(ch, msg []byte) int {
	ps := &s.ps
	if s.cl != nil && s.cl.isLeader() {
		ps.relay = aof.AppendMessage(ps.relay, ch, msg) // every member publishes it (relayed)
	}
	n := s.deliver(ch, msg, nil)
	for _, p := range ps.patterns {
		if !p.matches(ch) {
			continue
		}
		ps.msg = appendPMessage(ps.msg[:0], p.pat, ch, msg)
		for _, cs := range p.subs {
			s.push(cs, ps.msg)
		}
		n += len(p.subs)
		ps.received += uint64(len(p.subs))
	}
	return n
}

// deliver delivers msg on channel ch to its subscribers, then to those of each live pattern
// of matched; it returns how many received it.
func (s *Server) deliver(ch, msg []byte, matched []*psPattern) int {
	ps := &s.ps
	n := 0
	if c := ps.channels[string(ch)]; c != nil {
		ps.msg = appendMessage(ps.msg[:0], ch, msg)
		for _, cs := range c.subs {
			if !cs.closed { // (closed: its channels are being ended, unsubscribeClosed)
				s.push(cs, ps.msg)
				n++
			}
		}
	}
	for _, p := range matched {
		if p.dead {
			continue
		}
		ps.msg = appendPMessage(ps.msg[:0], p.pat, ch, msg)
		for _, cs := range p.subs {
			s.push(cs, ps.msg)
		}
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

// push appends a rendered message to a subscriber's output, and closes the subscriber once
// its unsent output passes the pubsub hard limit (or has stayed past the soft limit too long).
func (s *Server) push(cs *conn, m []byte) {
	if cs.closed || cs.closing {
		return
	}
	b := s.out(cs)
	b = append(b, m...)
	s.put(cs, b)
	if s.pubsubOver(cs) {
		s.closeLater(cs)
	}
}

// pubsubOver reports whether subscriber cs is over the pubsub class of
// client-output-buffer-limit and must be closed (and logs it): its unsent output (its
// buffer and what gnet still holds) past the hard limit, or past the soft limit for longer
// than its time.
func (s *Server) pubsubOver(cs *conn) bool {
	subs := cs.slock.subs
	if subs == nil || cs.closing {
		return false // (closing: cut already, and logged once)
	}
	lim := s.ps.limit
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
	s.log.Warn().Uint64("conn", uint64(cs.owner)).Str("remote", remoteAddr(cs.c).String()).
		Int64("unsent", unsent).Int64("hard", lim.Hard).Int64("soft", lim.Soft).Float64("soft_seconds", lim.SoftFor.Seconds()).
		Str("limit", why).Msg("closing subscriber: over client-output-buffer-limit pubsub (it does not read its messages)")
	s.ps.cut++
	return true
}

// pubsubCmd answers PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | HELP.
func (s *Server) pubsubCmd(cs *conn, args [][]byte) {
	b := s.scratchFor(cs)
	sub := args[1]
	switch {
	case (resp.Is(sub, "NUMPAT") || resp.Is(sub, "HELP")) && len(args) != 2:
		b = resp.AppendError(b, "ERR wrong number of arguments for 'pubsub|"+strings.ToLower(string(sub))+"' command")
	case resp.Is(sub, "CHANNELS") && len(args) <= 3:
		var pat []byte
		if len(args) == 3 {
			pat = args[2]
		}
		n := 0
		for name := range s.ps.channels {
			if pat == nil || rediscmd.Match(pat, []byte(name)) {
				n++
			}
		}
		b = resp.AppendArray(b, n)
		for name := range s.ps.channels {
			if pat == nil || rediscmd.Match(pat, []byte(name)) {
				b = resp.AppendBulkString(b, name)
			}
		}
	case resp.Is(sub, "NUMSUB"):
		b = resp.AppendArray(b, 2*(len(args)-2))
		for _, ch := range args[2:] {
			n := 0
			if c := s.ps.channels[string(ch)]; c != nil {
				for _, cs := range c.subs {
					if !cs.closed { // (closed: its channels are being ended, unsubscribeClosed)
						n++
					}
				}
			}
			b = resp.AppendInt(resp.AppendBulk(b, ch), int64(n))
		}
	case resp.Is(sub, "NUMPAT"):
		b = resp.AppendInt(b, int64(len(s.ps.patIdx)))
	case resp.Is(sub, "HELP"):
		lines := []string{
			"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CHANNELS [<pattern>]",
			"    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT",
			"    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]",
			"    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).",
			"HELP",
			"    Print this help.",
		}
		b = resp.AppendArray(b, len(lines))
		for _, l := range lines {
			b = resp.AppendSimple(b, l)
		}
	case resp.Is(sub, "CHANNELS"):
		b = resp.AppendError(b, "ERR unknown subcommand or wrong number of arguments for '"+clip(sub)+"'. Try PUBSUB HELP.")
	default:
		b = resp.AppendError(b, "ERR unknown subcommand '"+clip(sub)+"'. Try PUBSUB HELP.")
	}
	s.sendTo(cs, b)
}

// resetCmd answers RESET: the connection as a new one, as Redis 7.0's: no transaction, no
// WATCH, no subscription, database 0, slock's text semantics off, logged out.
func (s *Server) resetCmd(cs *conn) {
	sc := cs.slock
	if sc.tx.active {
		s.txReset(cs)
	}
	s.unwatchAll(cs)
	s.unsubscribeAll(cs)
	sc.text.DB = 0
	sc.text.Slock = false
	sc.user = nil
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "RESET"))
}

// notifyFlags are notify-keyspace-events' classes, as Redis's.
type notifyFlags uint32

// The classes, as Redis's letters, and tallyd's own: L, slock's locks.
const (
	nGeneric  notifyFlags = 1 << iota // g
	nString                           // $
	nList                             // l
	nSet                              // s
	nHash                             // h
	nZset                             // z
	nExpired                          // x
	nEvicted                          // e
	nStream                           // t
	nModule                           // d
	nNew                              // n
	nKeyMiss                          // m
	nKeyspace                         // K
	nKeyevent                         // E
	nLock                             // L: tallyd's lock and unlock events (not in A)
	nAll      = nGeneric | nString | nList | nSet | nHash | nZset | nExpired | nEvicted | nStream | nModule
)

// classLetters are the classes in the order CONFIG GET writes them.
var classLetters = []struct {
	f notifyFlags
	c byte
}{{nGeneric, 'g'}, {nString, '$'}, {nList, 'l'}, {nSet, 's'}, {nHash, 'h'}, {nZset, 'z'},
	{nExpired, 'x'}, {nEvicted, 'e'}, {nStream, 't'}, {nModule, 'd'}, {nNew, 'n'}}

// parseNotify parses a notify-keyspace-events value; false if it has a character that is no
// class.
func parseNotify(v string) (notifyFlags, bool) {
	var f notifyFlags
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case 'A':
			f |= nAll
		case 'K':
			f |= nKeyspace
		case 'E':
			f |= nKeyevent
		case 'm':
			f |= nKeyMiss
		case 'L':
			f |= nLock
		default:
			ok := false
			for _, l := range classLetters {
				if l.c == c {
					f |= l.f
					ok = true
				}
			}
			if !ok {
				return 0, false
			}
		}
	}
	return f, true
}

// String is the value as CONFIG GET answers it, normalised as Redis 7.0 does (A for all
// its classes, then K, E, m); tallyd's L follows the classes.
func (f notifyFlags) String() string {
	var b []byte
	if f&nAll == nAll {
		b = append(b, 'A')
	} else {
		for _, l := range classLetters {
			if f&l.f != 0 {
				b = append(b, l.c)
			}
		}
	}
	if f&nLock != 0 {
		b = append(b, 'L')
	}
	if f&nKeyspace != 0 {
		b = append(b, 'K')
	}
	if f&nKeyevent != 0 {
		b = append(b, 'E')
	}
	if f&nKeyMiss != 0 {
		b = append(b, 'm')
	}
	return string(b)
}

// notifyErr is Redis 7.0's CONFIG SET error for a notify-keyspace-events value.
const notifyErr = "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."

// notifying reports whether an event of class would be published at all: the class is on,
// one of K and E is, and someone listens.
func (s *Server) notifying(class notifyFlags) bool {
	f := s.ps.notify
	if f&class == 0 || f&(nKeyspace|nKeyevent) == 0 {
		return false
	}
	if s.cl != nil {
		// In a cluster the leader publishes every change's events, for the other members'
		// subscribers too; a follower publishes only what the leader's entries carry (relayed).
		return s.cl.isLeader()
	}
	return len(s.ps.channels) > 0 || len(s.ps.patIdx) > 0
}

// notifyKey publishes event on key of db, of class, as Redis's notifyKeyspaceEvent: on
// __keyspace@<db>__:<key> the event, on __keyevent@<db>__:<event> the key. Every change
// site calls it once the change is made (GETDEL: del, nGeneric; GETEX: expire or persist,
// nGeneric, as Redis's); it costs nothing while notifications are off or nobody listens.
func (s *Server) notifyKey(db uint8, key []byte, class notifyFlags, event string) {
	if !s.notifying(class) {
		return
	}
	ps := &s.ps
	ps.ev = append(ps.ev[:0], event...)
	if ps.notify&nKeyspace != 0 {
		ps.ch = append(ps.ch[:0], "__keyspace@"...)
		ps.ch = strconv.AppendUint(ps.ch, uint64(db), 10)
		ps.ch = append(append(ps.ch, "__:"...), key...)
		s.publish(ps.ch, ps.ev)
	}
	if ps.notify&nKeyevent != 0 {
		ps.ch = append(ps.ch[:0], "__keyevent@"...)
		ps.ch = strconv.AppendUint(ps.ch, uint64(db), 10)
		ps.ch = append(append(ps.ch, "__:"...), event...)
		s.publish(ps.ch, key)
	}
}

// lockKeyName is the name a lock key has in notifications: the text name of a key whose
// LockKey is a short text name's (1 to 15 bytes, right-aligned after zero bytes), else its 32
// hex digits (a binary key, or a long text name, which is hashed).
func lockKeyName(dst []byte, key [16]byte) []byte {
	i := 0
	for i < len(key) && key[i] == 0 {
		i++
	}
	if i > 0 {
		return append(dst, key[i:]...)
	}
	return hex.AppendEncode(dst, key[:])
}

// notifyLock publishes a lock event (class L) on a lock key.
func (s *Server) notifyLock(db uint8, key [16]byte, event string) {
	if !s.notifying(nLock) {
		return
	}
	s.ps.name = lockKeyName(s.ps.name[:0], key)
	s.notifyKey(db, s.ps.name, nLock, event)
}

// obufClasses are client-output-buffer-limit's client classes, in the order CONFIG GET
// writes them; only pubsub is enforced here (a normal client's output is --max-output's).
var obufClasses = [3]string{"normal", "slave", "pubsub"}

// obufLimits renders client-output-buffer-limit as CONFIG GET answers it.
func (ps *pubsubState) obufLimits() string {
	var b []byte
	for i, c := range obufClasses {
		l := ps.obuf[i]
		if i == 2 {
			l = ps.limit
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(append(b, c...), ' ')
		b = strconv.AppendInt(b, l.Hard, 10)
		b = strconv.AppendInt(append(b, ' '), l.Soft, 10)
		b = strconv.AppendInt(append(b, ' '), int64(l.SoftFor/time.Second), 10)
	}
	return string(b)
}

// obufErr is Redis 7.0's CONFIG SET error for a client-output-buffer-limit value.
func obufErr(why string) string {
	return "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - " + why
}

// parseObuf parses a client-output-buffer-limit value, "class hard soft seconds"...,
// into the limits it sets (by class index), or Redis 7.0's error.
func parseObuf(v string, into *[3]PubsubLimit, set *[3]bool) string {
	f := strings.Fields(v)
	if len(f)%4 != 0 {
		return obufErr("Wrong number of arguments in buffer limit configuration.")
	}
	for i := 0; i < len(f); i += 4 {
		c := -1
		switch strings.ToLower(f[i]) {
		case "normal":
			c = 0
		case "slave", "replica":
			c = 1
		case "pubsub":
			c = 2
		}
		if c < 0 {
			return obufErr("Invalid client class specified in buffer limit configuration.")
		}
		hard, ok1 := memBytes(f[i+1])
		soft, ok2 := memBytes(f[i+2])
		secs, err := strconv.ParseInt(f[i+3], 10, 64)
		if !ok1 || !ok2 || err != nil || secs < 0 || secs > int64(1<<62)/int64(time.Second) {
			return obufErr("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		into[c], set[c] = PubsubLimit{Hard: hard, Soft: soft, SoftFor: time.Duration(secs) * time.Second}, true
	}
	return ""
}

// memBytes parses a Redis memory size: digits with an optional unit, k/m/g (powers of
// 1000) or kb/mb/gb (of 1024), in any case.
func memBytes(v string) (int64, bool) {
	mul := int64(1)
	l := strings.ToLower(v)
	for _, u := range []struct {
		s string
		m int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(l, u.s) {
			mul, l = u.m, l[:len(l)-len(u.s)]
			break
		}
	}
	if l == "" || l[0] < '0' || l[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(l, 10, 64)
	if err != nil || n > (1<<62)/mul {
		return 0, false
	}
	return n * mul, true
}

// ParsePubsubLimit parses the --client-output-buffer-limit flag: Redis's value for the
// pubsub class ("32mb 8mb 60"), or with class names ("pubsub 32mb 8mb 60").
func ParsePubsubLimit(v string) (PubsubLimit, error) {
	if f := strings.Fields(v); len(f) == 3 {
		v = "pubsub " + v
	}
	var l [3]PubsubLimit
	var set [3]bool
	l[2] = DefaultPubsubLimit
	if why := parseObuf(v, &l, &set); why != "" {
		return PubsubLimit{}, &configError{v, why[strings.LastIndex(why, " - ")+3:]}
	}
	return l[2], nil
}

// ValidNotify reports whether v is a notify-keyspace-events value (for the flag's check).
func ValidNotify(v string) bool {
	_, ok := parseNotify(v)
	return ok
}

// configError is a flag value refused, with Redis's reason.
type configError struct{ v, why string }

func (e *configError) Error() string { return strconv.Quote(e.v) + ": " + e.why }

// configSet answers CONFIG SET param value...: notify-keyspace-events and
// client-output-buffer-limit change at once; any other parameter is refused (tallyd's
// settings are its flags), and nothing is changed unless every pair is valid.
func (s *Server) configSet(b []byte, args [][]byte) []byte {
	if len(args)%2 != 0 {
		return resp.AppendError(b, "ERR syntax error")
	}
	notify, obuf := s.ps.notify, [3]PubsubLimit{s.ps.obuf[0], s.ps.obuf[1], s.ps.limit}
	var seen [2]bool
	for i := 2; i < len(args); i += 2 {
		v := string(args[i+1])
		k := -1
		switch {
		case resp.Is(args[i], "notify-keyspace-events"):
			k = 0
			f, ok := parseNotify(v)
			if !ok {
				return resp.AppendError(b, notifyErr)
			}
			notify = f
		case resp.Is(args[i], "client-output-buffer-limit"):
			k = 1
			var set [3]bool
			if why := parseObuf(v, &obuf, &set); why != "" {
				return resp.AppendError(b, why)
			}
		default:
			return resp.AppendError(b, "ERR CONFIG SET is not supported for '"+clip(args[i])+
				"': restart tallyd with other flags (only notify-keyspace-events and client-output-buffer-limit change at run time)")
		}
		if seen[k] {
			return resp.AppendError(b, "ERR CONFIG SET failed (possibly related to argument '"+
				strings.ToLower(string(args[i]))+"') - duplicate parameter")
		}
		seen[k] = true
	}
	s.ps.notify, s.ps.obuf[0], s.ps.obuf[1], s.ps.limit = notify, obuf[0], obuf[1], obuf[2]
	s.st.locks.KeepGone = notify&(nExpired|nLock) != 0
	return resp.AppendSimple(b, "OK")
}

// notifyKV publishes the events of a key/value command's reply r (one key of it): Redis's
// event names, set (SET, SETEX, SETNX, GETSET, MSET...) then expire when it set an expiry,
// incrby for the whole INCR family, append, del (DEL, DELEX, DELIFEQ, GETDEL), expire (del for a
// time past), persist, and GETEX's expire, persist or del.
func (s *Server) notifyKV(cs *conn, r *slock.LockReply) {
	if s.ps.notify&(nKeyspace|nKeyevent) == 0 {
		return // (notifyKey checks the rest)
	}
	sc := cs.slock
	kv := &sc.req.KV
	name, db := sc.kvName, r.DB
	if !kv.Applied(r.Result) {
		return
	}
	switch kv.Op {
	case rediscmd.OpSet, rediscmd.OpGetSet, rediscmd.OpSetNX:
		if !rediscmd.HasValue(r.Value) {
			s.notifyKey(db, name, nNew, "new")
		}
		s.notifyKey(db, name, nString, "set")
		if kv.ExpireAt != 0 && !kv.KeepTTL || sc.kvPast {
			s.notifyKey(db, name, nGeneric, "expire")
		}
		if sc.kvPast { // EXAT or PXAT past: the key is gone at once, where Redis's goes at its next look
			s.notifyKey(db, name, nExpired, "expired")
		}
	case rediscmd.OpIncr:
		s.notifyKey(db, name, nString, "incrby")
	case rediscmd.OpAppend:
		if !rediscmd.HasValue(r.Value) {
			s.notifyKey(db, name, nNew, "new")
		}
		s.notifyKey(db, name, nString, "append")
	case rediscmd.OpDel, rediscmd.OpDelEx, rediscmd.OpGetDel:
		if r.Result == slock.ResultOK {
			s.notifyKey(db, name, nGeneric, "del")
		}
	case rediscmd.OpGetEx: // as Redis 7's GETEX: del for a time past, else persist or expire
		switch {
		case sc.kvPast:
			s.notifyKey(db, name, nGeneric, "del")
		case kv.Persist:
			s.notifyKey(db, name, nGeneric, "persist")
		default:
			s.notifyKey(db, name, nGeneric, "expire")
		}
	case rediscmd.OpExpire:
		if sc.kvPast {
			s.notifyKey(db, name, nGeneric, "del")
		} else {
			s.notifyKey(db, name, nGeneric, "expire")
		}
	case rediscmd.OpPersist:
		s.notifyKey(db, name, nGeneric, "persist")
	}
}

// notifyHash publishes the events of a hash write that succeeded: hset, hincrby, hdel (when
// it removed a field, n) and del when the last field went (gone).
func (s *Server) notifyHash(db uint8, h *rediscmd.Hash, n int64, gone bool) {
	switch h.Op {
	case rediscmd.HashSet:
		s.notifyKey(db, h.Key, nHash, "hset")
	case rediscmd.HashIncr:
		s.notifyKey(db, h.Key, nHash, "hincrby")
	case rediscmd.HashDel:
		if n > 0 {
			s.notifyKey(db, h.Key, nHash, "hdel")
		}
		if gone {
			s.notifyKey(db, h.Key, nGeneric, "del")
		}
	}
}

// notifyExpiry publishes an expiry the store reported: expired (class x) for a key whose value
// went with it, named by its value record, as Redis's; else lock-expired (class L) for a lock.
func (s *Server) notifyExpiry(r *store.LockReply) {
	if len(s.ps.muted) > 0 {
		w := watchKey{r.DB, r.Key}
		if _, ok := s.ps.muted[w]; ok {
			delete(s.ps.muted, w)
			return
		}
	}
	if r.Gone != nil {
		name, ok := rediscmd.KeyName(r.Gone)
		if !ok {
			s.ps.name = lockKeyName(s.ps.name[:0], r.Key)
			name = s.ps.name
		}
		s.notifyKey(r.DB, name, nExpired, "expired")
		return
	}
	s.notifyLock(r.DB, r.Key, "lock-expired")
}

// notifyLockReply publishes a lock or unlock (class L) that a LOCK or UNLOCK (text or binary,
// a WILL, an EXECUTE) made.
func (s *Server) notifyLockReply(r *store.LockReply) {
	if r.Result != store.LockOK || !s.notifying(nLock) {
		return
	}
	if r.Kind == store.KindUnlock {
		s.notifyLock(r.DB, r.Key, "unlock")
	} else {
		s.notifyLock(r.DB, r.Key, "lock")
	}
}

// kvPast reports whether kv, a key/value command, deletes its key by a time already past:
// EXPIRE and its kin to a time past, SET or GETEX with EXAT or PXAT past.
func kvPast(kv *rediscmd.KV, now int64) bool {
	switch kv.Op {
	case rediscmd.OpExpire:
		return kv.When <= now/1e6
	case rediscmd.OpSet:
		return kv.Frame.Expried == 0 && kv.ExpireAt == 0 && !kv.KeepTTL
	case rediscmd.OpGetEx:
		return kv.Frame.Type != 0 && !kv.Persist && kv.ExpireAt == 0
	}
	return false
}

// muteExpiry keeps the store's expiry of key, which a command is deleting by a time past, from
// being published as expired: the command publishes its own event. Each tick forgets what
// is left (the expiry comes at the next advance).
func (ps *pubsubState) muteExpiry(db uint8, key [16]byte) {
	if ps.muted == nil {
		ps.muted = make(map[watchKey]struct{})
	}
	ps.muted[watchKey{db, key}] = struct{}{}
}

// noPermChannelText is Redis 7.0's error for a channel a user's &patterns do not allow.
const noPermChannelText = "NOPERM this user has no permissions to access one of the channels used as arguments"

// channelsAllowed reports whether u, restricted to its &patterns, may use the channels of
// the command line args of spec, as Redis 7.0 checks them: a channel of SUBSCRIBE or PUBLISH
// must match one of the patterns, a pattern of PSUBSCRIBE must be one of them, as written.
func channelsAllowed(u *acl.User, spec *rediscmd.Spec, args [][]byte) bool {
	var names [][]byte
	switch spec.Cmd {
	case rediscmd.CmdSubscribe, rediscmd.CmdPSubscribe:
		names = args[1:]
	case rediscmd.CmdPublish:
		names = args[1:2]
	default:
		return true
	}
	for _, n := range names {
		ok := false
		for _, p := range u.Channels() {
			if spec.Cmd == rediscmd.CmdPSubscribe && p == string(n) || spec.Cmd != rediscmd.CmdPSubscribe && rediscmd.Match([]byte(p), n) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// maxRelayBuf is the largest relay buffer kept between proposals.
const maxRelayBuf = 1 << 20

// relayed publishes a message a committed raft entry carries: one the leader published (a
// PUBLISH, a keyspace notification) when it made the entry's changes. The leader does not
// apply its own entries, so each member publishes each message once.
func (s *Server) relayed(ch, msg []byte) {
	s.publish(ch, msg)
}
