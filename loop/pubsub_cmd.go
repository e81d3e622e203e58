package loop

import (
	"sort"
	"strconv"
	"strings"

	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// This file is pub/sub's commands (pubsub.go has its state and delivery): SUBSCRIBE,
// PSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, PUBSUB, RESET and the subscribed mode. The steps of
// a command that goes on across turns (publishStep, unsubscribeAllStep) are Server's, which
// owns the continuations (textcont.go); the rest are pubsub's.

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
func (ps *pubsub) subscribe(cs *conn, names [][]byte, pattern bool) {
	sc := cs.slock
	if sc.subs == nil {
		sc.subs = &connSubs{}
	}
	kind := "subscribe"
	if pattern {
		kind = "psubscribe"
	}
	b := ps.h.out(cs)
	for _, n := range names {
		if !ps.hasSub(cs, n, pattern) {
			if why := ps.subRefused(cs, n, pattern); why != "" {
				b = resp.AppendError(b, why+": not subscribed to '"+clip(n)+"'")
				continue
			}
			ps.addSub(cs, n, pattern)
		}
		b = appendSubReply(b, kind, n, sc.subs.count())
	}
	ps.h.put(cs, b)
}

// subRefused is the error (without its end) for a subscription of cs to channel (or
// pattern) n past a bound, "" when it is within them all.
func (ps *pubsub) subRefused(cs *conn, n []byte, pattern bool) string {
	cfg := ps.cfg
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
	case pattern && ps.patIdx[string(n)] == nil && len(ps.patIdx) >= cfg.MaxPatterns:
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
		for _, n := range s.ps.subNames(cs, pattern) {
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
func (ps *pubsub) subNames(cs *conn, pattern bool) [][]byte {
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
func (ps *pubsub) hasSub(cs *conn, n []byte, pattern bool) bool {
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
		n := s.ps.publish(ch, msg)
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(n)))
		return
	}
	s.ps.relayOut(ch, msg)
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
	n := s.ps.deliver(c.pubCh, c.pubMsg, c.matched)
	clear(c.matched)
	c.active, c.matched, c.pubCh, c.pubMsg = false, c.matched[:0], nil, nil
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(n)))
	s.contRelease(c)
}

// command answers PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | HELP.
func (ps *pubsub) command(cs *conn, args [][]byte) {
	b := ps.h.out(cs)
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
		for name := range ps.channels {
			if pat == nil || rediscmd.Match(pat, []byte(name)) {
				n++
			}
		}
		b = resp.AppendArray(b, n)
		for name := range ps.channels {
			if pat == nil || rediscmd.Match(pat, []byte(name)) {
				b = resp.AppendBulkString(b, name)
			}
		}
	case resp.Is(sub, "NUMSUB"):
		b = resp.AppendArray(b, 2*(len(args)-2))
		for _, ch := range args[2:] {
			n := 0
			if c := ps.channels[string(ch)]; c != nil {
				for _, cs := range c.subs {
					if !cs.closed { // (closed: its channels are being ended, pubsub.closed)
						n++
					}
				}
			}
			b = resp.AppendInt(resp.AppendBulk(b, ch), int64(n))
		}
	case resp.Is(sub, "NUMPAT"):
		b = resp.AppendInt(b, int64(len(ps.patIdx)))
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
	ps.h.put(cs, b)
}

// resetCmd answers RESET: the connection as a new one, as Redis 7.0's: no transaction, no
// WATCH, no subscription, database 0, slock's text semantics off, logged out.
func (s *Server) resetCmd(cs *conn) {
	sc := cs.slock
	if sc.tx.active {
		s.txReset(cs)
	}
	s.unwatchAll(cs)
	s.ps.unsubscribeAll(cs)
	sc.text.DB = 0
	sc.text.Slock = false
	sc.user = nil
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "RESET"))
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
