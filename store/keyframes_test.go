package store

import (
	"bytes"
	"runtime"
	"testing"
	"time"

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
