package store

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/klauspost/compress/zstd"
)

func TestKeyframeEncodersMakeOneForOneHarnessAndMoreOnlyWhenBusy(t *testing.T) {
	var k keyframeEncoders
	defer k.releaseIdle()
	src := bytes.Repeat([]byte("a keyframe of text, "), 5000)
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	for range 5 {
		z, err := k.encode(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := dec.DecodeAll(z, nil); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("a keyframe does not decode back: %v", err)
		}
	}
	if k.made != 1 {
		t.Fatalf("keyframes one after another made %d encoders, want 1", k.made)
	}
	// Every CPU's encoder busy: the next keyframe waits for one to come back.
	max := runtime.GOMAXPROCS(0)
	var held []*zstd.Encoder
	for range max {
		enc, err := k.get()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, enc)
	}
	if k.made != max {
		t.Fatalf("%d keyframes at once made %d encoders", max, k.made)
	}
	got := make(chan *zstd.Encoder)
	go func() {
		enc, _ := k.get()
		got <- enc
	}()
	select {
	case <-got:
		t.Fatal("a keyframe got an encoder while all were busy")
	case <-time.After(50 * time.Millisecond):
	}
	k.put(held[0])
	if enc := <-got; enc != held[0] || k.made != max {
		t.Fatalf("the waiting keyframe got %p (made %d), want the encoder put back", enc, k.made)
	}
	for _, enc := range append(held[1:], held[0]) {
		k.put(enc)
	}
}

// A keyframe is cut into as few frames as the largest frame allows, and into more, of at least
// the smallest frame each, while there are cores to compress them at once.
func TestKeyframeFramesUseTheCoresWithinTheFrameSizes(t *testing.T) {
	for _, c := range []struct{ n, cores, want int }{
		{0, 2, 1},
		{1 << 20, 8, 1},
		{keyframeFrameMin*2 - 1, 8, 1},
		{keyframeFrameMin * 2, 8, 2},
		{10 << 20, 1, 2}, // the largest frame still bounds it
		{10 << 20, 2, 2},
		{10 << 20, 8, 2},
		{17 << 20, 2, 3},
		{64 << 20, 4, 8},
		{64 << 20, 32, 16},
	} {
		got := keyframeFrames(c.n, c.cores)
		if got != c.want {
			t.Errorf("keyframeFrames(%d, %d cores) = %d, want %d", c.n, c.cores, got, c.want)
		}
		if each := c.n / got; c.n > keyframeFrame && (each > keyframeFrame || each < keyframeFrameMin) {
			t.Errorf("%d bytes in %d frames: %d each, outside %d..%d", c.n, got, each, keyframeFrameMin, keyframeFrame)
		}
	}
}

// A keyframe of several frames is cut into frames of equal size, so that they finish together,
// and they decode back to the keyframe.
func TestAKeyframeOfSeveralFramesIsCutEvenly(t *testing.T) {
	var k keyframeEncoders
	defer k.releaseIdle()
	var h harness
	payload := make([]byte, 9<<20+12345)
	for i := range payload {
		payload[i] = byte(i*7 + i/1000)
	}
	comp, out, err := h.compressKeyframe(&k, payload)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := statefmt.Frames(out, uint64(len(payload)))
	if err != nil || comp != statefmt.CompressionZstdFrames {
		t.Fatalf("%v, %v", comp, err)
	}
	if want := keyframeFrames(len(payload), runtime.GOMAXPROCS(0)); len(frames) != want {
		t.Fatalf("%d frames, want %d", len(frames), want)
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var back []byte
	for _, f := range frames {
		if d := f.RawLen - frames[0].RawLen; d < -1 || d > 1 {
			t.Fatalf("frames of %d and %d bytes: want equal ones", frames[0].RawLen, f.RawLen)
		}
		if back, err = dec.DecodeAll(f.Data, back); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(back, payload) {
		t.Fatal("the frames do not decode back to the keyframe")
	}
}
