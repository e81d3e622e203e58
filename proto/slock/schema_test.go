package slock

import (
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schemaText is §8.2 of the slock spec as a FileDescriptorProto, so the
// tests can decode and encode the CALL bodies with the protobuf library's
// own dynamic messages, independently of the package's hand-rolled code.
const schemaText = `
name: "slock_call.proto" package: "slocktest" syntax: "proto3"
message_type { name: "LockDBLockData"
  field { name: "data" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "commandType" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "data_flag" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT32 } }
message_type { name: "LockDBLock"
  field { name: "lock_key" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "locked_count" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "lock_data" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockData" } }
message_type { name: "LockDBLockCommand"
  field { name: "request_id" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "flag" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "lock_id" number: 3 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "lock_key" number: 4 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "timeout_flag" number: 5 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "timeout" number: 6 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "expried_flag" number: 7 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "expried" number: 8 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "count" number: 9 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "rcount" number: 10 label: LABEL_OPTIONAL type: TYPE_UINT32 } }
message_type { name: "LockDBLockLocked"
  field { name: "lock_id" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "start_time" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "timeout_time" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "expried_time" number: 4 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "locked_count" number: 5 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "aof_time" number: 6 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "is_timeouted" number: 7 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "is_expried" number: 8 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "is_aof" number: 9 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "is_long_time" number: 10 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "command" number: 11 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockCommand" } }
message_type { name: "LockDBLockWait"
  field { name: "lock_id" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "start_time" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "timeout_time" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "is_long_time" number: 4 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "command" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockCommand" } }
message_type { name: "LockDBListLockRequest"
  field { name: "db_id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT32 } }
message_type { name: "LockDBListLockResponse"
  field { name: "locks" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".slocktest.LockDBLock" } }
message_type { name: "LockDBListLockedRequest"
  field { name: "db_id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "lock_key" number: 2 label: LABEL_OPTIONAL type: TYPE_BYTES } }
message_type { name: "LockDBListLockedResponse"
  field { name: "lock_key" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "locked_count" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "locks" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockLocked" }
  field { name: "lock_data" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockData" } }
message_type { name: "LockDBListWaitRequest"
  field { name: "db_id" number: 1 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "lock_key" number: 2 label: LABEL_OPTIONAL type: TYPE_BYTES } }
message_type { name: "LockDBListWaitResponse"
  field { name: "lock_key" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "locked_count" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  field { name: "locks" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockWait" }
  field { name: "lock_data" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".slocktest.LockDBLockData" } }
`

var (
	schemaOnce sync.Once
	schemaFile protoreflect.FileDescriptor
	schemaErr  error
)

// schema returns the descriptor of the named §8.2 message.
func schema(t testing.TB, name string) protoreflect.MessageDescriptor {
	t.Helper()
	schemaOnce.Do(func() {
		var fdp descriptorpb.FileDescriptorProto
		if schemaErr = prototext.Unmarshal([]byte(schemaText), &fdp); schemaErr == nil {
			schemaFile, schemaErr = protodesc.NewFile(&fdp, nil)
		}
	})
	if schemaErr != nil {
		t.Fatalf("schema: %v", schemaErr)
	}
	md := schemaFile.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("schema has no message %s", name)
	}
	return md
}

// pb builds a dynamic message of the named type from field name/value
// pairs; zero values are left unset, as proto3 does. Values are uint32,
// uint64, bool, []byte, [16]byte, *dynamicpb.Message, or a
// []*dynamicpb.Message for a repeated field.
func pb(t testing.TB, name string, kv ...any) *dynamicpb.Message {
	t.Helper()
	m := dynamicpb.NewMessage(schema(t, name))
	for i := 0; i < len(kv); i += 2 {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(kv[i].(string)))
		if fd == nil {
			t.Fatalf("%s has no field %s", name, kv[i])
		}
		switch v := kv[i+1].(type) {
		case uint32:
			if v != 0 {
				m.Set(fd, protoreflect.ValueOfUint32(v))
			}
		case uint64:
			if v != 0 {
				m.Set(fd, protoreflect.ValueOfUint64(v))
			}
		case bool:
			if v {
				m.Set(fd, protoreflect.ValueOfBool(v))
			}
		case []byte:
			if len(v) > 0 {
				m.Set(fd, protoreflect.ValueOfBytes(v))
			}
		case [16]byte:
			m.Set(fd, protoreflect.ValueOfBytes(v[:]))
		case *dynamicpb.Message:
			if v != nil {
				m.Set(fd, protoreflect.ValueOfMessage(v))
			}
		case []*dynamicpb.Message:
			l := m.Mutable(fd).List()
			for _, e := range v {
				l.Append(protoreflect.ValueOfMessage(e))
			}
		default:
			t.Fatalf("pb: %s.%s: unsupported %T", name, kv[i], v)
		}
	}
	return m
}

// decodes checks that body decodes, with the protobuf library, as a
// message of the named type equal to want.
func decodes(t *testing.T, name string, body []byte, want *dynamicpb.Message) {
	t.Helper()
	got := dynamicpb.NewMessage(schema(t, name))
	if err := proto.Unmarshal(body, got); err != nil {
		t.Fatalf("%s: proto.Unmarshal: %v", name, err)
	}
	if len(got.GetUnknown()) > 0 {
		t.Fatalf("%s: unknown fields % x (wrong number or wire type)", name, got.GetUnknown())
	}
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", name, prototext.Format(got), prototext.Format(want))
	}
}

func pbData(t *testing.T, d *LockData) *dynamicpb.Message {
	if d == nil {
		return nil
	}
	return pb(t, "LockDBLockData", "data", d.Value, "commandType", d.Cmd, "data_flag", d.Flag)
}

func pbCommand(t *testing.T, c *Command) *dynamicpb.Message {
	return pb(t, "LockDBLockCommand", "request_id", c.RequestID, "flag", uint32(c.Flag), "lock_id", c.LockID,
		"lock_key", c.Key, "timeout_flag", uint32(c.TimeoutFlag), "timeout", uint32(c.Timeout),
		"expried_flag", uint32(c.ExpriedFlag), "expried", uint32(c.Expried), "count", uint32(c.Count),
		"rcount", uint32(c.Rcount))
}

// TestCallBodiesWithLibrary checks the encoders against the protobuf
// library decoding with the §8.2 schema, and the request decoders against
// bodies the library encodes.
func TestCallBodiesWithLibrary(t *testing.T) {
	d1 := &LockData{Value: str("value"), Cmd: DataAppend, Flag: 0x12}
	locks := []ListLock{{Key: key1, LockedCount: 2, Data: d1}, {Key: lid1}, {Key: seq16(9), LockedCount: 1 << 31, Data: &LockData{}}}
	var wantLocks []*dynamicpb.Message
	for i := range locks {
		wantLocks = append(wantLocks, pb(t, "LockDBLock", "lock_key", locks[i].Key, "locked_count", locks[i].LockedCount,
			"lock_data", pbData(t, locks[i].Data)))
	}
	decodes(t, "LockDBListLockResponse", AppendListLockResponse(nil, locks), pb(t, "LockDBListLockResponse", "locks", wantLocks))

	cmd2 := Command{RequestID: seq16(3), Flag: 0xff, Rcount: 1}
	locked := ListLocked{Key: key1, LockedCount: 3, Data: d1, Locks: []Locked{
		{LockID: lid1, StartTime: 1, TimeoutTime: 2, ExpriedTime: 1<<63 - 1, LockedCount: 2, AofTime: 1,
			IsTimeouted: true, IsExpried: false, IsAof: true, IsLongTime: false, Command: testCmd},
		{LockID: seq16(0x77), IsExpried: true, IsLongTime: true, Command: cmd2},
	}}
	var wantLocked []*dynamicpb.Message
	for i := range locked.Locks {
		l := &locked.Locks[i]
		wantLocked = append(wantLocked, pb(t, "LockDBLockLocked", "lock_id", l.LockID, "start_time", l.StartTime,
			"timeout_time", l.TimeoutTime, "expried_time", l.ExpriedTime, "locked_count", l.LockedCount,
			"aof_time", l.AofTime, "is_timeouted", l.IsTimeouted, "is_expried", l.IsExpried, "is_aof", l.IsAof,
			"is_long_time", l.IsLongTime, "command", pbCommand(t, &l.Command)))
	}
	decodes(t, "LockDBListLockedResponse", AppendListLockedResponse(nil, &locked), pb(t, "LockDBListLockedResponse",
		"lock_key", key1, "locked_count", uint32(3), "locks", wantLocked, "lock_data", pbData(t, d1)))

	wait := ListWait{Key: key1, Waits: []Wait{
		{LockID: lid1, StartTime: 10, TimeoutTime: 20, IsLongTime: true, Command: testCmd},
		{LockID: seq16(0x66), Command: cmd2},
	}}
	var wantWaits []*dynamicpb.Message
	for i := range wait.Waits {
		w := &wait.Waits[i]
		wantWaits = append(wantWaits, pb(t, "LockDBLockWait", "lock_id", w.LockID, "start_time", w.StartTime,
			"timeout_time", w.TimeoutTime, "is_long_time", w.IsLongTime, "command", pbCommand(t, &w.Command)))
	}
	decodes(t, "LockDBListWaitResponse", AppendListWaitResponse(nil, &wait), pb(t, "LockDBListWaitResponse",
		"lock_key", key1, "locks", wantWaits))

	// Requests encoded by the library decode to what they hold.
	for _, name := range []string{"LockDBListLockedRequest", "LockDBListWaitRequest"} {
		body, err := proto.Marshal(pb(t, name, "db_id", uint32(7), "lock_key", key1))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := ParseListKeyRequest(body); err != nil || r != (ListRequest{DB: 7, Key: key1}) {
			t.Errorf("%s: ParseListKeyRequest = %+v, %v", name, r, err)
		}
	}
	body, err := proto.Marshal(pb(t, "LockDBListLockRequest", "db_id", uint32(254)))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ParseListLockRequest(body); err != nil || r != (ListRequest{DB: 254}) {
		t.Errorf("ParseListLockRequest = %+v, %v", r, err)
	}
	// And our request encoder is what the library reads.
	decodes(t, "LockDBListLockedRequest", AppendListRequest(nil, 9, key1[:]), pb(t, "LockDBListLockedRequest",
		"db_id", uint32(9), "lock_key", key1))
}
