package fuzz

import (
	"bytes"
	"reflect"
	"runtime"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

// allocBound fails when f allocated more than perByte times the input plus slack. Decoders must
// not allocate without bound on forged lengths.
func allocBound(t *testing.T, input []byte, perByte, slack uint64, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, perByte*uint64(len(input))+slack; got > limit {
		t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(input), got, limit)
	}
}

// FuzzStateJSON: DecodeJSON never panics, allocates boundedly, and whatever it accepts encodes
// to JSON and binary forms that decode back to the same state.
func FuzzStateJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var s *statefmt.HarnessState
		var err error
		allocBound(t, data, 200, 4<<20, func() { s, err = statefmt.DecodeJSON(data) })
		if err != nil {
			return
		}
		js, err := statefmt.EncodeJSON(s)
		if err != nil {
			t.Fatalf("accepted state does not re-encode: %v", err)
		}
		back, err := statefmt.DecodeJSON(js)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("JSON re-encoding does not decode to the same state: %v", err)
		}
		bin, err := statefmt.EncodeBinary(s)
		if err != nil {
			t.Fatalf("accepted state has no binary form: %v", err)
		}
		if fromBin, err := statefmt.DecodeBinary(bin); err != nil || !reflect.DeepEqual(fromBin, s) {
			t.Fatalf("binary form does not decode to the same state: %v", err)
		}
	})
}

// FuzzStateBinary: DecodeBinary never panics, allocates boundedly, and whatever it accepts
// re-encodes to exactly the input (the encoding is canonical).
func FuzzStateBinary(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var s *statefmt.HarnessState
		var err error
		allocBound(t, data, 40, 1<<20, func() { s, err = statefmt.DecodeBinary(data) })
		if err != nil {
			return
		}
		again, err := statefmt.EncodeBinary(s)
		if err != nil {
			t.Fatalf("accepted state does not re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			// Only non-canonical JSON values may differ; they must still decode equal.
			if back, err := statefmt.DecodeBinary(again); err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("re-encoding differs and does not decode to the same state: %v", err)
			}
		}
	})
}

// FuzzRecord: DecodeRecord never panics and whatever it accepts re-encodes to exactly the input.
func FuzzRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := statefmt.DecodeRecord(data)
		if err != nil {
			return
		}
		if again := statefmt.EncodeRecord(nil, rec); !bytes.Equal(again, data) {
			t.Fatalf("accepted record re-encodes differently")
		}
	})
}

// FuzzFrames: the frame table of a zstd-frames payload never panics the parser, and what it
// accepts tiles the raw length and fits the payload. The input is the raw length (3 bytes,
// little endian) and the payload.
func FuzzFrames(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		rawLen := uint64(data[0]) | uint64(data[1])<<8 | uint64(data[2])<<16
		frames, err := statefmt.Frames(data[3:], rawLen)
		if err != nil {
			return
		}
		raw, stored := 0, 0
		for _, fr := range frames {
			if fr.RawOffset != raw {
				t.Fatalf("frame at raw offset %d, want %d", fr.RawOffset, raw)
			}
			raw, stored = raw+fr.RawLen, stored+len(fr.Data)
		}
		if uint64(raw) != rawLen || stored >= len(data)-3 {
			t.Fatalf("frames cover %d raw bytes (want %d) and %d of %d payload bytes", raw, rawLen, stored, len(data)-3)
		}
	})
}
