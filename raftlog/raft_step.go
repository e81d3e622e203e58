package raftlog

import "sync/atomic"

// Stepping the raft log's writer, for tests that drive several cluster members on one
// goroutine and must be deterministic (loop's in-process cluster simulation). Left alone, the
// writer wakes whenever the loop queues something, so how the loop's calls are cut into
// batches (and how many progress reports the loop gets) depends on the scheduler. A stepped
// log's writer writes only when Step asks, everything queued so far as one batch, and Step
// returns once the writer has reported it: the same calls always make the same batches.
// Production code never steps a log.

// stepLogs makes OpenRaft open stepped logs (StepRaftLogs).
var stepLogs atomic.Bool

// StepRaftLogs makes every raft log OpenRaft opens from now on (on) a stepped one, whose
// writer writes only when Step asks; off stops that. For tests only: it is process-wide.
func StepRaftLogs(on bool) { stepLogs.Store(on) }

// raftStepper is a stepped log's side of the writer.
type raftStepper struct {
	on   atomic.Bool   // Step wakes the writer, not the calls that queue
	done chan struct{} // the writer reported a batch Step asked for
}

// stepIfAsked makes l a stepped log if StepRaftLogs asked for it; OpenRaft calls it before
// the writer starts.
func (l *RaftLog) stepIfAsked() {
	if !stepLogs.Load() {
		return
	}
	st := &raftStepper{done: make(chan struct{})}
	st.on.Store(true)
	report := l.done
	l.done = func(p RaftProgress) {
		report(p)
		if st.on.Load() {
			st.done <- struct{}{}
		}
	}
	l.step = st
}

// Stepped says whether l is a stepped log.
func (l *RaftLog) Stepped() bool { return l.step != nil && l.step.on.Load() }

// Step has a stepped log's writer write everything queued as one batch and waits until it
// has reported it (its done function returned). It returns false, at once, when nothing is
// queued. Call it from the goroutine that queues. A stepped log's writes must not fail: a
// batch the writer retries by itself would report without a Step to wait for it.
func (l *RaftLog) Step() bool {
	l.mu.Lock()
	n := len(l.ops)
	l.mu.Unlock()
	if n == 0 {
		return false
	}
	l.wake <- struct{}{}
	<-l.step.done
	return true
}

// Unstepped gives the writer back its own wake-ups (before Close, which needs them).
func (l *RaftLog) Unstepped() {
	if l.step != nil {
		l.step.on.Store(false)
	}
}
