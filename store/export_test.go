package store

import (
	"sync/atomic"
	"time"
)

// SetHeadsEvery sets how often a checkpoint rewrites the heads file, for a test's process.
func SetHeadsEvery(d time.Duration) { headsEvery = d }

// SetSettleWait sets how long a deletion waits for the tables it made obsolete to be deleted,
// for a test's process; it returns the previous value.
func SetSettleWait(d time.Duration) time.Duration {
	prev := settleWait
	settleWait = d
	return prev
}

// SetBeforeDeleteBatch sets what a deletion calls between its heads file and its batch, for a
// test's process; it returns what unsets it.
func SetBeforeDeleteBatch(f func()) (unset func()) {
	beforeDeleteBatch = f
	return func() { beforeDeleteBatch = nil }
}

// IdleCompressors counts the keyframe encoders and the delta stream encoders the store keeps
// idle for the next harness.
func (s *Store) IdleCompressors() (keyframe, stream int) {
	s.keyframes.mu.Lock()
	defer s.keyframes.mu.Unlock()
	return len(s.keyframes.idle), len(s.streamEncs)
}

// InFlight counts the checkpoints whose fsync the store has not seen through.
func (s *Store) InFlight() int64 { return s.inflightN.Load() }

// CountYields counts the times a checkpoint yields to the log's writer, for a test's process;
// it returns the count and what stops counting.
func CountYields() (count func() int64, stop func()) {
	var n atomic.Int64
	prev := yield
	yield = func() { n.Add(1); prev() }
	return n.Load, func() { yield = prev }
}
