package store

import (
	"runtime/debug"
	"time"

	"github.com/harness-edge/harness-edge/bridge"
)

// DefaultIdleRelease is how long a store goes without a checkpoint before it gives back the
// compressors it keeps for the next harness (StoreOptions.IdleRelease).
const DefaultIdleRelease = 30 * time.Second

// The store keeps compressors between harnesses: each delta stream's encoder once its harness
// stops, for the next harness that starts one (about 4 MB: window and tables), and the keyframe
// encoders, up to one per CPU (2 to 18 MB each: the tables, and the history of the largest
// state compressed, up to an 8 MB window). A daemon that ran a burst of harnesses and then
// waits all night for the next held them all: 48 MB of Go heap on two CPUs (a heap profile,
// when keyframes took 20 MB each at a slower level: 42 MB keyframe encoders, 6 MB stream
// encoders), more on more. Once a store has gone IdleRelease without a
// checkpoint it lets go of those not in use (a harness that runs keeps its own), and gives the
// memory back to the system; the next checkpoint that needs one makes it again, a few
// milliseconds once. A daemon's resident memory after a burst of 1,000 two-step harnesses, 42 s
// later: 40 MB, where it stayed at 243 MB before.

// wrote notes a checkpoint, and arms the idle release if it is not armed. It costs a
// checkpoint a clock read and two atomic operations: the timer is not reset at each, it looks
// at the time of the last when it fires.
func (s *Store) wrote() {
	s.lastWrite.Store(time.Now().UnixNano())
	if s.idleArmed.Load() {
		return
	}
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if s.idleArmed.Load() || s.idleClosed {
		return
	}
	s.idleArmed.Store(true)
	s.idleTimer = time.AfterFunc(s.idleAfter, s.releaseIdle)
}

// releaseIdle gives back the idle compressors and decompressors once the store has gone
// idleAfter without a checkpoint, or waits again for what is left of it. Then the memory goes
// back to the system: the Go heap's at once (the runtime would otherwise keep it for minutes),
// and the C heap's the engine freed (bridge.TrimNativeHeap).
func (s *Store) releaseIdle() {
	if s.releaseIdleLocked() {
		debug.FreeOSMemory()
		bridge.TrimNativeHeap()
	}
}

func (s *Store) releaseIdleLocked() bool {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if s.idleClosed {
		return false
	}
	if wait := time.Duration(s.lastWrite.Load() + int64(s.idleAfter) - time.Now().UnixNano()); wait > 0 {
		s.idleTimer.Reset(wait)
		return false
	}
	s.idleArmed.Store(false)
	s.closeIdle()
	return true
}

// closeIdle closes the compressors and decompressors the store keeps idle (the idle release,
// and Close); those in use are not touched.
func (s *Store) closeIdle() {
	s.keyframes.releaseIdle()
	for {
		select {
		case enc := <-s.streamEncs:
			enc.Close()
		case dec := <-s.streamDecs:
			dec.Close()
		default:
			return
		}
	}
}

// stopIdle stops the idle release for good (Close).
func (s *Store) stopIdle() {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	s.idleClosed = true
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
}

// releaseIdle closes the keyframe encoders no keyframe is using.
func (k *keyframeEncoders) releaseIdle() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, enc := range k.idle {
		enc.Close()
	}
	k.made -= len(k.idle)
	k.idle = nil
}
