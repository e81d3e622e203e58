package main

import (
	"runtime"
	"testing"
)

func TestProcsFloor(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(1)
	if got := procsFloor(); got != minProcs || runtime.GOMAXPROCS(0) != minProcs {
		t.Fatalf("from 1 P: procsFloor %d, GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), minProcs)
	}
	runtime.GOMAXPROCS(3)
	if got := procsFloor(); got != 0 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("from 3 Ps: procsFloor %d, GOMAXPROCS %d, want 3 left alone", got, runtime.GOMAXPROCS(0))
	}
	t.Setenv("GOMAXPROCS", "1") // the operator's choice stands
	runtime.GOMAXPROCS(1)
	if got := procsFloor(); got != 0 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("with GOMAXPROCS=1 set: procsFloor %d, GOMAXPROCS %d", got, runtime.GOMAXPROCS(0))
	}
}
