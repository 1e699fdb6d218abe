// Package enginetest is the conformance suite every engine backend must pass, and the workload
// generators that tests, fuzzers and benchmarks share (go-workflows' backendtest pattern).
package enginetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/workload"
)

// Pair is one named (base, target) case.
type Pair struct {
	Name         string
	Base, Target []byte
}

// Pairs is the deterministic table of cases every backend must round-trip.
func Pairs() []Pair {
	r := rand.New(rand.NewPCG(1, 2))
	mb := workload.Text(r, 1<<20)
	half := workload.Random(r, 64<<10)
	other := workload.Random(r, 64<<10)
	appendMostly := workload.Text(r, 200_000)
	grown := append(bytes.Clone(appendMostly[:150_000]), workload.Text(r, 1500)...)
	grown = append(grown, appendMostly[150_000:]...)
	grown[10] = '#'
	return []Pair{
		{"nil-nil", nil, nil},
		{"empty-empty", []byte{}, []byte{}},
		{"nil-target", nil, []byte("hello")},
		{"base-empty", []byte("hello"), []byte{}},
		{"one-byte", []byte("a"), []byte("b")},
		{"identical", mb[:10_000], mb[:10_000]},
		{"unrelated", workload.Random(r, 3000), workload.Random(r, 5000)},
		{"append-at-end", mb[:50_000], append(bytes.Clone(mb[:50_000]), workload.Text(r, 2000)...)},
		{"prepend", mb[:50_000], append(workload.Text(r, 300), mb[:50_000]...)},
		{"truncate", mb[:50_000], mb[:20_000]},
		{"append-mostly-state", appendMostly, grown},
		{"swap-halves", append(bytes.Clone(half), other...), append(bytes.Clone(other), half...)},
		{"zeros", make([]byte, 100_000), append(make([]byte, 70_000), append([]byte{1}, make([]byte, 40_000)...)...)},
		{"1MB-10-scattered-edits", mb, workload.ScatteredEdits(r, mb, 10)},
	}
}

// Run checks one engine against the contract; peers are the other engines available in this
// build, which must apply this engine's deltas to identical bytes.
func Run(t *testing.T, e bridge.Engine, peers []bridge.Engine) {
	native := e.Backend() != bridge.BackendFallback
	liveBefore := e.LiveBuffers()

	t.Run("abi", func(t *testing.T) {
		if v := e.ABIVersion(); v != bridge.ABIVersion {
			t.Fatalf("ABIVersion() = %d, want %d", v, bridge.ABIVersion)
		}
	})

	t.Run("hash", func(t *testing.T) {
		for _, c := range []struct {
			in   string
			want uint64
		}{{"", 0xEF46DB3751D8E999}, {"a", 0xD24EC4F1A98C6E5B}, {"abc", 0x44BC2CF5AD770999}} {
			if got := e.Hash64([]byte(c.in)); got != c.want {
				t.Errorf("Hash64(%q) = %#x, want %#x", c.in, got, c.want)
			}
		}
		if e.Hash64(nil) != e.Hash64([]byte{}) {
			t.Error("Hash64(nil) differs from Hash64(empty)")
		}
		r := rand.New(rand.NewPCG(3, 4))
		data := workload.Random(r, 1<<20)
		for _, n := range []int{0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 65, 1000, 1 << 20} {
			want := bridge.Fallback().Hash64(data[:n])
			if got := e.Hash64(data[:n]); got != want {
				t.Errorf("Hash64 of %d bytes = %#x, fallback says %#x", n, got, want)
			}
		}
	})

	t.Run("roundtrip", func(t *testing.T) {
		enc := mustEncoder(t, e)
		defer enc.Close()
		for _, p := range Pairs() {
			d, err := enc.Encode(p.Base, p.Target)
			if err != nil {
				t.Fatalf("%s: Encode: %v", p.Name, err)
			}
			bl, tl, err := bridge.DeltaHeader(d)
			if err != nil || bl != uint64(len(p.Base)) || tl != uint64(len(p.Target)) {
				t.Fatalf("%s: header (%d, %d, %v), want (%d, %d)", p.Name, bl, tl, err, len(p.Base), len(p.Target))
			}
			for _, a := range append([]bridge.Engine{e}, peers...) {
				got, err := a.ApplyDelta(nil, p.Base, d, bridge.DefaultMaxTarget)
				if err != nil {
					t.Fatalf("%s: %s applying %s's delta: %v", p.Name, a.Backend(), e.Backend(), err)
				}
				if !bytes.Equal(got, p.Target) {
					t.Fatalf("%s: %s applying %s's delta: wrong target (%d bytes, want %d)", p.Name, a.Backend(), e.Backend(), len(got), len(p.Target))
				}
			}
			if !native && !bytes.Equal(d, bridge.EncodeLiteral(len(p.Base), p.Target)) {
				t.Fatalf("%s: fallback delta is not the literal delta", p.Name)
			}
		}
	})

	t.Run("append-semantics", func(t *testing.T) {
		enc := mustEncoder(t, e)
		defer enc.Close()
		base := []byte("the quick brown fox jumps over the lazy dog, twice over: the quick brown fox")
		target := []byte("the quick brown cat jumps over the lazy dog, twice over: the quick brown cat!")
		d, err := enc.Encode(base, target)
		if err != nil {
			t.Fatal(err)
		}
		// Appends to a prefix.
		got, err := e.ApplyDelta([]byte("prefix:"), base, d, bridge.DefaultMaxTarget)
		if err != nil || string(got) != "prefix:"+string(target) {
			t.Fatalf("append to prefix: %q, %v", got, err)
		}
		// Reuses spare capacity without allocating a new array.
		buf := make([]byte, 0, 4*len(target))
		got, err = e.ApplyDelta(buf, base, d, bridge.DefaultMaxTarget)
		if err != nil || !bytes.Equal(got, target) || &got[0] != &buf[:1][0] {
			t.Fatalf("spare capacity not reused (err %v)", err)
		}
		// A dst sharing memory with the base must not corrupt the base mid-apply.
		backing := append(bytes.Clone(base), make([]byte, 2*len(target))...)
		b2 := backing[:len(base)]
		got, err = e.ApplyDelta(backing[:0], b2, d, bridge.DefaultMaxTarget)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("dst overlapping the base: %q, %v", got, err)
		}
		// On error dst comes back unchanged.
		got, err = e.ApplyDelta([]byte("keep"), base, d[:len(d)-1], bridge.DefaultMaxTarget)
		if err == nil || string(got) != "keep" {
			t.Fatalf("error path changed dst: %q, %v", got, err)
		}
	})

	t.Run("literal-deltas", func(t *testing.T) {
		for _, p := range Pairs() {
			got, err := e.ApplyDelta(nil, p.Base, bridge.EncodeLiteral(len(p.Base), p.Target), bridge.DefaultMaxTarget)
			if err != nil || !bytes.Equal(got, p.Target) {
				t.Fatalf("%s: literal delta: %v", p.Name, err)
			}
		}
	})

	if native {
		t.Run("scattered-edits-delta-under-1KB", func(t *testing.T) {
			enc := mustEncoder(t, e)
			defer enc.Close()
			r := rand.New(rand.NewPCG(5, 6))
			for i := range 20 {
				base := workload.Text(r, 1<<20)
				target := workload.ScatteredEdits(r, base, 10)
				d, err := enc.Encode(base, target)
				if err != nil {
					t.Fatal(err)
				}
				if len(d) >= 1024 {
					t.Fatalf("case %d: delta of %d bytes for 10 scattered edits in 1 MB", i, len(d))
				}
			}
		})
	}

	t.Run("forged", func(t *testing.T) {
		base := []byte("0123456789abcdefghij")
		enc := mustEncoder(t, e)
		defer enc.Close()
		good, err := enc.Encode(base, []byte("0123456789ABCDEFghij-tail"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range Forged(base, good) {
			_, err := e.ApplyDelta(nil, base, c.Delta, c.Max)
			if !errors.Is(err, c.Want) {
				t.Errorf("%s: got %v, want %v", c.Name, err, c.Want)
			}
			var ee *bridge.EngineError
			if !errors.As(err, &ee) || ee.Backend != e.Backend() || ee.Message == "" {
				t.Errorf("%s: error %#v lacks backend %s or message", c.Name, err, e.Backend())
			}
		}
		for n := range len(good) {
			if _, err := e.ApplyDelta(nil, base, good[:n], 1<<20); !errors.Is(err, bridge.StatusInvalidDelta) {
				t.Fatalf("truncated to %d bytes: got %v", n, err)
			}
		}
	})

	t.Run("bit-flips-agree-with-peers", func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		base := workload.Text(r, 4000)
		enc := mustEncoder(t, e)
		defer enc.Close()
		d, err := enc.Encode(base, workload.ScatteredEdits(r, base, 5))
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			m := bytes.Clone(d)
			m[r.IntN(len(m))] ^= 1 << r.IntN(8)
			Agree(t, append([]bridge.Engine{e}, peers...), base, m, 1<<16)
		}
	})

	t.Run("closed-encoder", func(t *testing.T) {
		enc := mustEncoder(t, e)
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := enc.Encode([]byte("a"), []byte("b")); !errors.Is(err, bridge.ErrClosed) {
			t.Fatalf("Encode after Close: %v, want ErrClosed", err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		shared := mustEncoder(t, e)
		defer shared.Close()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				own, err := e.NewEncoder()
				if err != nil {
					t.Error(err)
					return
				}
				defer own.Close()
				r := rand.New(rand.NewPCG(uint64(g), 9))
				for range 50 {
					base := workload.Text(r, 1+r.IntN(20_000))
					target := workload.ScatteredEdits(r, base, 3)
					for _, x := range []bridge.Encoder{own, shared} {
						d, err := x.Encode(base, target)
						if err != nil {
							t.Error(err)
							return
						}
						got, err := e.ApplyDelta(nil, base, d, bridge.DefaultMaxTarget)
						if err != nil || !bytes.Equal(got, target) {
							t.Errorf("concurrent round trip failed: %v", err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	})

	t.Run("chain", func(t *testing.T) { runChain(t, e, peers) })
	t.Run("keyframe-on-demand", func(t *testing.T) { runKeyframeOnDemand(t, e, peers) })

	// Last: every engine-owned buffer handed out above (outputs and error messages) was freed.
	t.Run("every-buffer-freed-once", func(t *testing.T) {
		if after := e.LiveBuffers(); after != liveBefore {
			t.Fatalf("engine reports %d live buffers after the suite, %d before", after, liveBefore)
		}
		if seen, live := bridge.OwnedStats(); live != 0 {
			t.Fatalf("bridge tracker: %d buffers still live (of %d received)", live, seen)
		} else if bridge.InvariantsOn && native && seen == 0 {
			t.Fatal("bridge tracker saw no engine buffers: the native backend bypassed copyAndFree")
		}
	})
}

// ForgedCase is a delta that must be refused with a given status.
type ForgedCase struct {
	Name  string
	Delta []byte
	Max   int
	Want  bridge.Status
}

func header(baseLen, targetLen uint64) []byte {
	d := []byte("ETD\x01")
	d = appendUvarint(d, baseLen)
	return appendUvarint(d, targetLen)
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendSvarint(b []byte, v int64) []byte { return appendUvarint(b, uint64(v<<1)^uint64(v>>63)) }

// Forged lists hand-made bad deltas for a base (good is a valid delta for it).
func Forged(base, good []byte) []ForgedCase {
	n := uint64(len(base))
	copyPast := appendSvarint(appendUvarint(header(n, 10), 10<<1|1), int64(n)-5)
	copyNeg := appendSvarint(appendUvarint(header(n, 4), 4<<1|1), -1)
	copyHuge := appendSvarint(appendUvarint(header(n, 4), 4<<1|1), 1<<62)
	copyMin := appendUvarint(appendUvarint(header(n, 4), 4<<1|1), ^uint64(0))
	addShort := append(appendUvarint(header(n, 10), 10<<1), "abc"...)
	zeroOp := appendUvarint(header(n, 1), 0)
	overrun := append(appendUvarint(header(n, 2), 3<<1), "abc"...)
	trailing := append(bytes.Clone(good), 0)
	badVersion := bytes.Clone(good)
	badVersion[3] = 9
	return []ForgedCase{
		{"empty", nil, 1 << 20, bridge.StatusInvalidDelta},
		{"short", []byte("ETD"), 1 << 20, bridge.StatusInvalidDelta},
		{"bad-magic", append([]byte("XYZ"), good[3:]...), 1 << 20, bridge.StatusInvalidDelta},
		{"bad-version", badVersion, 1 << 20, bridge.StatusInvalidDelta},
		{"overlong-varint", append([]byte("ETD\x01"), bytes.Repeat([]byte{0xff}, 11)...), 1 << 20, bridge.StatusInvalidDelta},
		{"varint-over-64-bits", append([]byte("ETD\x01"), append(bytes.Repeat([]byte{0xff}, 9), 0x02)...), 1 << 20, bridge.StatusInvalidDelta},
		{"wrong-base-length", header(n+1, 0), 1 << 20, bridge.StatusBaseMismatch},
		{"target-over-limit", header(n, 1<<40), 1 << 20, bridge.StatusTooLarge},
		{"huge-target-no-ops", header(n, 1<<40), 1 << 62, bridge.StatusInvalidDelta},
		{"copy-past-base", copyPast, 1 << 20, bridge.StatusInvalidDelta},
		{"copy-negative-offset", copyNeg, 1 << 20, bridge.StatusInvalidDelta},
		{"copy-huge-offset", copyHuge, 1 << 20, bridge.StatusInvalidDelta},
		{"copy-min-offset", copyMin, 1 << 20, bridge.StatusInvalidDelta},
		{"add-past-end", addShort, 1 << 20, bridge.StatusInvalidDelta},
		{"zero-length-op", zeroOp, 1 << 20, bridge.StatusInvalidDelta},
		{"op-overruns-target", overrun, 1 << 20, bridge.StatusInvalidDelta},
		{"trailing-bytes", trailing, 1 << 20, bridge.StatusInvalidDelta},
	}
}

// Agree applies one delta with every engine and fails when they disagree on the outcome: the same
// status, and on success the same bytes (wazero's no-diff idea).
func Agree(t testing.TB, engines []bridge.Engine, base, delta []byte, max int) {
	t.Helper()
	var firstOut []byte
	var firstStatus bridge.Status
	for i, e := range engines {
		out, err := e.ApplyDelta(nil, base, delta, max)
		st := bridge.StatusOK
		if err != nil {
			var ee *bridge.EngineError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: error of unexpected type %T: %v", e.Backend(), err, err)
			}
			st = ee.Status
			if st == bridge.StatusPanic || st == bridge.StatusNullParameter {
				t.Fatalf("%s: %v on delta %x", e.Backend(), err, delta)
			}
		} else if len(out) > max {
			t.Fatalf("%s: %d-byte target exceeds the %d-byte limit", e.Backend(), len(out), max)
		}
		if i == 0 {
			firstOut, firstStatus = out, st
			continue
		}
		if st != firstStatus || !bytes.Equal(out, firstOut) {
			t.Fatalf("backends disagree on delta %x: %s says %s (%d bytes), %s says %s (%d bytes)",
				delta, engines[0].Backend(), firstStatus, len(firstOut), e.Backend(), st, len(out))
		}
	}
}

func mustEncoder(t *testing.T, e bridge.Engine) bridge.Encoder {
	t.Helper()
	enc, err := e.NewEncoder()
	if err != nil {
		t.Fatalf("%s: NewEncoder: %v", e.Backend(), err)
	}
	return enc
}

// chainStates is an append-mostly sequence: a history that grows first, then a small rest that
// changes every step, as statefmt lays states out. hints[i] is the unchanged prefix of states[i].
func chainStates(n int) (states [][]byte, hints, inserts []int) {
	r := rand.New(rand.NewPCG(21, 22))
	var hist []byte
	prevHist := 0
	for i := range n {
		hist = append(hist, workload.Text(r, 300+r.IntN(1700))...)
		s := append(bytes.Clone(hist), fmt.Sprintf("|rest step=%d status=running|", i)...)
		states, hints, inserts = append(states, s), append(hints, prevHist), append(inserts, len(hist)-prevHist)
		prevHist = len(hist)
	}
	return states, hints, inserts
}

// insertHint is the insert hint runChain gives record i: the true one for even i, a wrong one
// (too long, too short, past the end) for odd i, which must cost only bytes.
func insertHint(i int, inserts []int) int {
	switch i % 6 {
	case 1:
		return inserts[i] + 13
	case 3:
		return inserts[i] / 2
	case 5:
		return 1 << 30
	}
	return inserts[i]
}

func runChain(t *testing.T, e bridge.Engine, peers []bridge.Engine) {
	states, hints, inserts := chainStates(60)
	w, err := e.NewChain(bridge.ChainPolicy{MaxReplay: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type rec struct {
		info    bridge.RecordInfo
		payload []byte
	}
	var recs []rec
	appended := 0
	for i, s := range states {
		info, p, err := w.Append(s, hints[i], insertHint(i, inserts))
		if err != nil {
			t.Fatal(err)
		}
		if info.Seq != uint64(i+1) || info.StateLen != uint64(len(s)) || info.StateHash != bridge.Fallback().Hash64(s) {
			t.Fatalf("record %d header wrong: %+v", i+1, info)
		}
		if e.Backend() == bridge.BackendFallback && info.Kind != bridge.KindKeyframe {
			t.Fatalf("fallback wrote a %d record, want keyframes only", info.Kind)
		}
		if !bytes.Equal(w.State(nil), s) {
			t.Fatalf("chain state after record %d differs", i+1)
		}
		if i > 0 {
			appended += len(s) - len(states[i-1])
		}
		recs = append(recs, rec{info, p})
	}
	if e.Backend() != bridge.BackendFallback {
		delta := 0
		for _, r := range recs {
			if r.info.Kind == bridge.KindDelta {
				delta += len(r.payload)
			}
		}
		if keys := countKeyframes(recs, func(r rec) uint32 { return r.info.Kind }); keys < 60/17 || keys > 60/17+2 {
			t.Fatalf("%d keyframes in 60 records with MaxReplay 16", keys)
		}
		if delta > appended*11/10 {
			t.Fatalf("deltas carry %d bytes for %d appended: the prefix hint was not used", delta, appended)
		}
	}
	last := states[len(states)-1]
	for _, a := range append([]bridge.Engine{e}, peers...) {
		// Replay from the last keyframe, as a restore does, and from the first.
		for _, from := range []int{lastKeyframe(recs, func(r rec) uint32 { return r.info.Kind }), 0} {
			r, err := a.NewChain(bridge.ChainPolicy{})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range recs[from:] {
				if err := r.Push(x.info, x.payload); err != nil {
					t.Fatalf("%s replaying %s's chain from record %d: %v", a.Backend(), e.Backend(), from+1, err)
				}
			}
			if !bytes.Equal(r.State(nil), last) || r.Head() != w.Head() {
				t.Fatalf("%s replayed %s's chain to a different state or head", a.Backend(), e.Backend())
			}
			// A resumed chain appends where the writer would have.
			next := append(bytes.Clone(last), "+one more"...)
			i1, p1, err1 := r.Append(next, len(last)-len("|rest step=59 status=running|"), 0)
			if err1 != nil || i1.Seq != 61 || i1.StateHash != bridge.Fallback().Hash64(next) {
				t.Fatalf("%s: append after replay: %+v %v", a.Backend(), i1, err1)
			}
			if err := r.Push(i1, p1); err == nil {
				t.Fatalf("%s: a record pushed twice was accepted", a.Backend())
			}
			r.Close()
		}
		// Damage in any record is reported with its sequence number, and the records before it
		// still rebuild their state.
		for _, victim := range []int{0, 1, 17, 40, 59} {
			r, _ := a.NewChain(bridge.ChainPolicy{})
			for i, x := range recs {
				info, p := x.info, bytes.Clone(x.payload)
				if i == victim {
					if len(p) > 4 {
						p[len(p)/2] ^= 0x40
					} else {
						info.StateHash ^= 1
					}
				}
				err := r.Push(info, p)
				if i < victim && err != nil {
					t.Fatalf("%s: record %d refused before the damage: %v", a.Backend(), i+1, err)
				}
				if i == victim {
					if !errors.Is(err, bridge.StatusInvalidRecord) || !strings.Contains(err.Error(), fmt.Sprintf("record %d:", victim+1)) {
						t.Fatalf("%s: damaged record %d: %v", a.Backend(), victim+1, err)
					}
					if r.Head().Seq != 0 {
						t.Fatalf("%s: chain not reset after a refused record", a.Backend())
					}
					break
				}
			}
			r.Close()
		}
	}
}

// runKeyframeOnDemand: bridge.AppendKeyframe in the middle of deltas makes a keyframe record
// that every backend replays, from the chain's start and as the first record of a restore, and
// the deltas after it apply on top of it.
func runKeyframeOnDemand(t *testing.T, e bridge.Engine, peers []bridge.Engine) {
	states, hints, _ := chainStates(12)
	w, err := e.NewChain(bridge.ChainPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type rec struct {
		info    bridge.RecordInfo
		payload []byte
	}
	var recs []rec
	forced := 7
	for i, s := range states {
		var info bridge.RecordInfo
		p := s
		if i == forced {
			info, err = bridge.AppendKeyframe(w, s)
		} else {
			info, p, err = w.Append(s, hints[i], 0)
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if i == forced && (info.Kind != bridge.KindKeyframe || info.Seq != uint64(i+1) || info.BaseSeq != info.Seq) {
			t.Fatalf("AppendKeyframe made %+v", info)
		}
		if e.Backend() != bridge.BackendFallback && i == forced+1 && info.Kind != bridge.KindDelta {
			t.Fatalf("record %d after the forced keyframe is kind %d, want a delta", i+1, info.Kind)
		}
		if !bytes.Equal(w.State(nil), s) {
			t.Fatalf("chain state after record %d differs", i+1)
		}
		recs = append(recs, rec{info, bytes.Clone(p)})
	}
	for _, a := range append([]bridge.Engine{e}, peers...) {
		for _, from := range []int{0, forced} {
			r, err := a.NewChain(bridge.ChainPolicy{})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range recs[from:] {
				if err := r.Push(x.info, x.payload); err != nil {
					t.Fatalf("%s replaying %s's chain from record %d: %v", a.Backend(), e.Backend(), from+1, err)
				}
			}
			if !bytes.Equal(r.State(nil), states[len(states)-1]) || r.Head() != w.Head() {
				t.Fatalf("%s replayed %s's chain from record %d to a different state or head", a.Backend(), e.Backend(), from+1)
			}
			r.Close()
		}
	}
	// A keyframe on an empty chain is its first record.
	c, _ := e.NewChain(bridge.ChainPolicy{})
	defer c.Close()
	if info, err := bridge.AppendKeyframe(c, states[0]); err != nil || info.Seq != 1 || !bytes.Equal(c.State(nil), states[0]) {
		t.Fatalf("AppendKeyframe on an empty chain: %+v %v", info, err)
	}
}

func countKeyframes[T any](recs []T, kind func(T) uint32) int {
	n := 0
	for _, r := range recs {
		if kind(r) == bridge.KindKeyframe {
			n++
		}
	}
	return n
}

func lastKeyframe[T any](recs []T, kind func(T) uint32) int {
	for i := len(recs) - 1; i >= 0; i-- {
		if kind(recs[i]) == bridge.KindKeyframe {
			return i
		}
	}
	return 0
}
