// Package counter encodes and decodes the yrmcds counter protocol and its older semaphore variant.
//
// Both dialects share one framing: a 12-byte header
//
//	magic u8 | opcode u8 | flags/status u8 | reserved u8 | bodylen u32 | opaque u32
//
// followed by bodylen bytes, all integers big-endian. Requests carry magic
// 0x90 and replies 0x91. The package is a pure codec: [Decoder.Parse] turns
// bytes into a [Request] without copying, and the Append functions write
// replies (and, for clients, requests) onto a caller's buffer without
// allocating when it has room.
package counter

import "strconv"

// Framing constants.
const (
	HeaderLen     = 12              // bytes in every request and reply header
	MagicRequest  = 0x90            // byte 0 of a request
	MagicResponse = 0x91            // byte 0 of a reply
	MaxNameLen    = 65535           // longest counter or semaphore name
	MaxRequestLen = 10 + MaxNameLen // longest body of a legal request (Acquire)

	// DefaultMaxBody is the default for Decoder.MaxBody: a request body
	// claiming more than this closes the connection.
	DefaultMaxBody = 1 << 20
)

// Opcode is byte 1 of a header.
type Opcode uint8

// Opcodes of the counter protocol. The semaphore dialect has all but OpDump.
const (
	OpNoop    Opcode = 0x00
	OpGet     Opcode = 0x01
	OpAcquire Opcode = 0x02
	OpRelease Opcode = 0x03
	OpStats   Opcode = 0x10
	OpDump    Opcode = 0x11
)

// String returns the lower-case command name ("noop", "get", ...), or the
// opcode in hex ("0x12") if it is not one of the known ones.
func (o Opcode) String() string {
	switch o {
	case OpNoop:
		return "noop"
	case OpGet:
		return "get"
	case OpAcquire:
		return "acquire"
	case OpRelease:
		return "release"
	case OpStats:
		return "stats"
	case OpDump:
		return "dump"
	}
	return hex8(uint8(o))
}

// Status is byte 2 of a reply header.
type Status uint8

// Reply statuses.
const (
	StatusOK             Status = 0x00
	StatusNotFound       Status = 0x01
	StatusInvalid        Status = 0x04
	StatusNotAvailable   Status = 0x21
	StatusNotAcquired    Status = 0x22
	StatusUnknownCommand Status = 0x81
	StatusOutOfMemory    Status = 0x82
)

// Message returns the exact body text of an error reply with status s:
// "Not found", "Invalid arguments", "Resource not available",
// "Not acquired", "Unknown command" or "Out of memory". It returns ""
// for StatusOK and for statuses the protocol does not define.
func (s Status) Message() string {
	switch s {
	case StatusNotFound:
		return "Not found"
	case StatusInvalid:
		return "Invalid arguments"
	case StatusNotAvailable:
		return "Resource not available"
	case StatusNotAcquired:
		return "Not acquired"
	case StatusUnknownCommand:
		return "Unknown command"
	case StatusOutOfMemory:
		return "Out of memory"
	}
	return ""
}

// String returns "OK", the status's Message, or the status in hex ("0x05")
// if the protocol does not define it.
func (s Status) String() string {
	if s == StatusOK {
		return "OK"
	}
	if m := s.Message(); m != "" {
		return m
	}
	return hex8(uint8(s))
}

// Dialect selects the yrmcds counter protocol or its older semaphore
// variant. Both share framing, opcodes and statuses, but in the Semaphore
// dialect Acquire's second u32 is Initial instead of Maximum (validated the
// same way: Initial < Resources is invalid) and Dump is an unknown command.
// Any value other than Semaphore behaves as Counter.
type Dialect uint8

// Dialects.
const (
	Counter Dialect = iota
	Semaphore
)

// String returns "counter" or "semaphore".
func (d Dialect) String() string {
	if d == Semaphore {
		return "semaphore"
	}
	return "counter"
}

// hex8 formats b as "0x" and two lower-case hex digits.
func hex8(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{'0', 'x', digits[b>>4], digits[b&0xf]})
}

// itoa formats v in decimal, for error messages.
func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
