package loop

import (
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// slockResults maps the lock store's outcomes to slock's result codes (byte 19
// of a reply).
var slockResults = [store.NumLockResults]slock.Result{
	store.LockOK:             slock.ResultOK,
	store.LockUnknownDB:      slock.ResultUnknownDB,
	store.LockUnknownCommand: slock.ResultUnknownCommand,
	store.LockLockedError:    slock.ResultLockedError,
	store.LockUnlockError:    slock.ResultUnlockError,
	store.LockUnownError:     slock.ResultUnownError,
	store.LockTimeout:        slock.ResultTimeout,
	store.LockExpried:        slock.ResultExpried,
	store.LockUnknownError:   slock.ResultUnknownError,
	// An Add's own outcomes reach only the Redis-text side, which answers them as Redis's
	// errors (slockkv.go); no frame ever carries them.
	store.LockNotInteger: slock.ResultUnknownError,
	store.LockOverflow:   slock.ResultUnknownError,
}
