package loop

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// keySecretName is the file in the data directory that keeps the secret under which text
// key names longer than 15 bytes (or starting with a 0 byte) are hashed to LockKeys
// (rediscmd.Keys). It belongs with the log: the log's keys were mapped under it.
const keySecretName = "tallyd.keyid"

// newKeys returns a key-name mapping under a random secret: for a server without a data
// directory, whose keys do not outlive it.
func newKeys() *rediscmd.Keys {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("loop: no random source: " + err.Error())
	}
	return rediscmd.NewKeys(k)
}

// loadKeySecret maps key names under the data directory's secret, drawing it (and
// writing it, mode 0600, synced) on the directory's first start.
func (s *Server) loadKeySecret() error {
	path := filepath.Join(s.cfg.DataDir, keySecretName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(b) != 32 {
			return fmt.Errorf("key-name secret %s: %d bytes, want 32 (restore it from a backup with the log)", path, len(b))
		}
	case errors.Is(err, fs.ErrNotExist):
		b = make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		if err := writeSynced(path, b); err != nil {
			return fmt.Errorf("key-name secret: %w", err)
		}
	default:
		return fmt.Errorf("key-name secret: %w", err)
	}
	s.st.keys = rediscmd.NewKeys([32]byte(b))
	return nil
}

// writeSynced writes b to path through a temporary file, synced and renamed into place.
func writeSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// rekeyer moves the records of a log written before key names were mapped by rediscmd.Keys
// (by slock.TextID: 16-byte names as they are, 32 hex digits decoded, longer names
// MD5-hashed) to their keys now. A record with a value knows its name (the value's KEY
// property): if it is at the name's old LockKey, its key, and the LockId of a SET's holder
// (the key itself), move to the name's LockKey now; later records of the old LockKey without a value (the key's deletion)
// follow it. Records written since, and binary clients' keys, are left as they are.
type rekeyer struct {
	keys  *rediscmd.Keys
	moved map[keyAt][16]byte
}

// keyAt is a LockKey of a database.
type keyAt struct {
	db  uint8
	key [16]byte
}

func (r *rekeyer) rekey(ks *store.KeyState) {
	to, ok := [16]byte{}, false
	if name, named := rediscmd.KeyName(ks.Value); ks.Value != nil && named {
		to = r.keys.KeyID(name)
		if to == ks.Key || slock.TextID(name) != ks.Key {
			return // mapped now, or not by the old rule (a binary client's value naming another key)
		}
		if r.moved == nil {
			r.moved = make(map[keyAt][16]byte)
		}
		r.moved[keyAt{ks.DB, ks.Key}] = to
		ok = true
	} else {
		to, ok = r.moved[keyAt{ks.DB, ks.Key}]
	}
	if !ok {
		return
	}
	for i := range ks.Holders {
		if ks.Holders[i].LockID == ks.Key {
			ks.Holders[i].LockID = to
		}
	}
	ks.Key = to
}
