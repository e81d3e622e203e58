// Package pool encodes and decodes the PoolCounter line protocol.
//
// A request is one line ending in "\n" (one trailing "\r" is stripped):
//
//	ACQ4ME key workers maxqueue timeout
//	ACQ4ANY key workers maxqueue timeout
//	RELEASE
//	STATS arg
//
// and every reply is one line too, but for STATS FULL, which is a block of
// lines ([AppendStatsReply]). The package is a pure codec: [Decoder.Parse]
// turns a line into a [Request] without copying, and [AppendReply] writes a
// reply onto a caller's buffer without allocating when it has room. The
// client side ([AppendAcq4Me] and friends, [ParseReplyLine]) serves tests,
// benchmarks and tools.
package pool

import "strconv"

// DefaultMaxLine is the default for Decoder.MaxLine, and the line length
// beyond which the reference server garbles input.
const DefaultMaxLine = 1024

// Cmd is the command of a request line.
type Cmd uint8

// Commands. CmdBad is any line that is not one of the others, the empty
// line included; the answer to it is BadCommand.
const (
	CmdBad Cmd = iota
	CmdAcq4Me
	CmdAcq4Any
	CmdRelease
	CmdStats
)

var cmdNames = [...]string{"BAD", "ACQ4ME", "ACQ4ANY", "RELEASE", "STATS"}

// String returns the command's name as sent ("ACQ4ME", ...), "BAD" for
// CmdBad, or "Cmd(n)" for a value that is not a command.
func (c Cmd) String() string {
	if int(c) < len(cmdNames) {
		return cmdNames[c]
	}
	return "Cmd(" + strconv.Itoa(int(c)) + ")"
}

// Reply is one of the protocol's single-line replies.
type Reply uint8

// Replies, each sent as its String followed by "\n".
const (
	Locked          Reply = iota // LOCKED: the lock is held
	Done                         // DONE: an ACQ4ANY waiter is woken by a release; it holds nothing
	QueueFull                    // QUEUE_FULL
	Timeout                      // TIMEOUT
	LockHeld                     // LOCK_HELD: the connection has too many entries
	NotLocked                    // NOT_LOCKED: RELEASE with nothing to release
	Released                     // RELEASED
	BadCommand                   // ERROR BAD_COMMAND
	BadSyntax                    // ERROR BAD_SYNTAX
	WaitForResponse              // ERROR WAIT_FOR_RESPONSE
	WrongStat                    // ERROR WRONG_STAT (the reference omits its "\n"; this package does not)
	LineTooLong                  // ERROR LINE_TOO_LONG (then the server closes the connection)
	numReplies
)

// replyLines holds each reply's exact bytes, "\n" included.
var replyLines = [numReplies]string{
	Locked:          "LOCKED\n",
	Done:            "DONE\n",
	QueueFull:       "QUEUE_FULL\n",
	Timeout:         "TIMEOUT\n",
	LockHeld:        "LOCK_HELD\n",
	NotLocked:       "NOT_LOCKED\n",
	Released:        "RELEASED\n",
	BadCommand:      "ERROR BAD_COMMAND\n",
	BadSyntax:       "ERROR BAD_SYNTAX\n",
	WaitForResponse: "ERROR WAIT_FOR_RESPONSE\n",
	WrongStat:       "ERROR WRONG_STAT\n",
	LineTooLong:     "ERROR LINE_TOO_LONG\n",
}

// String returns the reply line without its "\n" ("LOCKED",
// "ERROR BAD_SYNTAX", ...), or "Reply(n)" for a value that is not a reply.
func (r Reply) String() string {
	if r < numReplies {
		s := replyLines[r]
		return s[:len(s)-1]
	}
	return "Reply(" + strconv.Itoa(int(r)) + ")"
}

// AppendReply appends reply r and its "\n" to dst. It panics if r is not
// one of the Reply constants.
func AppendReply(dst []byte, r Reply) []byte {
	if r >= numReplies {
		panic("pool: AppendReply of unknown reply " + strconv.Itoa(int(r)))
	}
	return append(dst, replyLines[r]...)
}
