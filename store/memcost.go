package store

import "unsafe"

// What the stored state costs in memory, for the memory budget (Store.Bytes). Each
// family keeps its total as it changes, from these figures: the Go allocator's size
// class of each object and buffer (allocSize), and the share of a map's or a slice's
// room each entry takes. TestMemoryCosts measures each kind of state with
// runtime.MemStats and checks these estimates against it.

// sizeClasses are the Go allocator's size classes up to 32 KiB (runtime/sizeclasses.go),
// which every Go release since 1.12 has kept; an object takes the smallest that fits it.
// TestAllocSize checks them against what append allocates.
var sizeClasses = [...]uint16{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

// allocSize is what the allocator takes for an object or buffer of n bytes: its size
// class, or beyond 32 KiB whole 8 KiB pages.
func allocSize(n int) int64 {
	if n <= 0 {
		return 0
	}
	if n > 32768 {
		return int64(n+8191) &^ 8191
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if int(sizeClasses[m]) < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int64(sizeClasses[lo])
}

// mapEntry is what one entry of a map with slots of slot bytes (key and value) costs: a
// Go map keeps a control byte per slot and fills its tables to between 7/16 and 7/8
// before it splits them; measured over sizes from 1,000 to 300,000 entries, an entry
// takes 1.4 to 2.2 slots, 1.7 on average.
func mapEntry(slot uintptr) int64 { return int64(slot+1) * 17 / 10 }

// sliceSlot is what one element of size bytes of a slice grown by append costs on
// average: append grows a slice by a quarter to double its length.
func sliceSlot(size uintptr) int64 { return int64(size) * 3 / 2 }

// Per-object costs of each family's state.
var (
	// A counter or semaphore besides its name: the object and its entry in the map
	// by name (string header and pointer).
	objectCost = allocSize(int(unsafe.Sizeof(object{}))) + mapEntry(16+8)

	// One entry of a ledger: its slot in the ledger's slice and, beyond linearMax
	// entries, in its index (pointer and int32).
	ledgerEntryCost = sliceSlot(unsafe.Sizeof(entry{})) + mapEntry(8+8)

	// An slock key, live or kept for reuse, besides its value's buffer.
	lockKeyObj = allocSize(int(unsafe.Sizeof(lockKey{})))
	// A live key's entry in its database's map (16-byte key, pointer).
	lockKeyEntry = mapEntry(16 + 8)
	// A holder or waiter, live or kept for reuse, besides its buffers.
	lockItemObj = allocSize(int(unsafe.Sizeof(lockItem{})))
	// A holder's entry in its key's index by LockId (keys with many holders).
	lockIndexEntry = mapEntry(16 + 8)
	// A connection the Locks knows of (waits, keep-alive holders, recently closed).
	lockOwnerCost = allocSize(int(unsafe.Sizeof(lockOwner{}))) + mapEntry(8+8)
	// A watched key: its record and its map entry.
	watchCost = allocSize(int(unsafe.Sizeof(watch{}))) + mapEntry(unsafe.Sizeof(keyRef{})+7+8)
	// A key's slot in its database's table of keys with a value.
	valueSlot = int64(unsafe.Sizeof((*lockKey)(nil)))

	// A PoolCounter key (live, or idle and kept for reuse) besides its name, and an
	// entry (held, waiting or kept for reuse) with its slot in its client's list.
	poolKeyCost   = allocSize(int(unsafe.Sizeof(poolKey{}))) + mapEntry(16+8)
	poolEntryCost = allocSize(int(unsafe.Sizeof(poolEntry{}))) + sliceSlot(8)

	// A slot of a deadline heap.
	heapSlot = int64(unsafe.Sizeof(slot{}))
)
