package aof

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestMessageRecords: pub/sub messages in a raft entry's records come back in order among
// the key states through DecodeRecordsWith, and DecodeRecords skips them.
func TestMessageRecords(t *testing.T) {
	var b []byte
	b = AppendMessage(b, []byte("__keyspace@0__:k"), []byte("set"))
	b = AppendState(b, &store.KeyState{DB: 1, Key: [16]byte{15: 'k'}})
	b = AppendMessage(b, []byte(""), []byte("bin\x00\r\n"))
	var got []string
	err := DecodeRecordsWith(b, func(ks *store.KeyState) { got = append(got, "state") }, nil,
		func(ch, msg []byte) { got = append(got, string(ch)+"|"+string(msg)) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"__keyspace@0__:k|set", "state", "|bin\x00\r\n"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("got %q, want %q", got, want)
	}
	n := 0
	if err := DecodeRecords(b, func(*store.KeyState) { n++ }, nil); err != nil || n != 1 {
		t.Fatalf("DecodeRecords: %d states, %v", n, err)
	}
	bad := AppendMessage(nil, []byte("ch"), nil)
	bad[9+1] = 0xff // a channel length past the record
	bad = seal(bad, 0)
	if err := DecodeRecordsWith(bad, nil, nil, func(ch, msg []byte) {}); err == nil {
		t.Fatal("a channel length past the record was accepted")
	}
}
