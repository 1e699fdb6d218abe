package statefmt_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/metrics"
	"testing"

	"github.com/harness-edge/harness-edge/internal/fuzzseed"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

// allocBound fails when f allocated more than perByte times the input plus slack. Decoders must
// not allocate without bound on forged lengths. It reads the runtime's allocation counter through
// runtime/metrics, which does not stop the world as runtime.ReadMemStats does: twice per input
// that made fuzzing an order of magnitude slower. Small allocations are counted a span at a time,
// well inside the slack.
func allocBound(t *testing.T, input []byte, perByte, slack uint64, f func()) {
	t.Helper()
	before := heapAllocs()
	f()
	if got, limit := heapAllocs()-before, perByte*uint64(len(input))+slack; got > limit {
		t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(input), got, limit)
	}
}

// heapAllocs is the bytes allocated on the heap since the process started.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
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

// stateSeeds returns the seeds of FuzzStateJSON, FuzzStateBinary and FuzzRecord. seedJSON and
// v0JSON are testdata's reference example and schema-0 fixture.
func stateSeeds(seedJSON, v0JSON []byte) (jsonSeeds, binarySeeds, recordSeeds []fuzzseed.Seed) {
	r := rand.New(rand.NewPCG(5, 6))
	small := stategen.State(r, stategen.Small)
	smallJSON, err := statefmt.EncodeJSON(small)
	mustNot(err)
	seedState, err := statefmt.DecodeJSON(seedJSON)
	mustNot(err)
	seedBin, err := statefmt.EncodeBinary(seedState)
	mustNot(err)
	smallBin, err := statefmt.EncodeBinary(small)
	mustNot(err)
	jsonSeeds = []fuzzseed.Seed{
		{Name: "seed-design-example", Args: [][]byte{seedJSON}},
		{Name: "seed-schema-v0", Args: [][]byte{v0JSON}},
		{Name: "seed-generated", Args: [][]byte{smallJSON}},
		{Name: "seed-schema-99", Args: [][]byte{bytes.Replace(seedJSON, []byte(`"schemaVersion": 1`), []byte(`"schemaVersion": 99`), 1)}},
		{Name: "seed-truncated", Args: [][]byte{seedJSON[:len(seedJSON)/2]}},
		{Name: "seed-empty-object", Args: [][]byte{[]byte(`{}`)}},
	}
	binarySeeds = []fuzzseed.Seed{
		{Name: "seed-design-example", Args: [][]byte{seedBin}},
		{Name: "seed-generated", Args: [][]byte{smallBin}},
		{Name: "seed-truncated", Args: [][]byte{smallBin[:len(smallBin)/2]}},
		{Name: "seed-header-only", Args: [][]byte{[]byte("HES\x01")}},
		{Name: "seed-layout-1", Args: [][]byte{mustRead("testdata/state-v1.bin")}},
		{Name: "seed-layout-2", Args: [][]byte{mustRead("testdata/state-v2.bin")}},
		{Name: "seed-layout-3", Args: [][]byte{mustRead("testdata/state-v3.bin")}},
		{Name: "seed-layout-4", Args: [][]byte{mustRead("testdata/state-v4.bin")}},
	}
	rec := statefmt.Record{Kind: statefmt.KindDelta, Seq: 2, BaseSeq: 1, Prefix: 4, StateHash: 7, ChainHash: 9,
		Compression: statefmt.CompressionZstd, RawLen: 12, StateFormat: 1, DeltaFormat: 1, Payload: []byte("zstd-bytes")}
	key := statefmt.Record{Kind: statefmt.KindKeyframe, Seq: 1, BaseSeq: 1, StateHash: 3, ChainHash: 4,
		RawLen: uint64(len(seedBin)), StateFormat: 1, Payload: seedBin}
	recordSeeds = []fuzzseed.Seed{
		{Name: "seed-delta", Args: [][]byte{statefmt.EncodeRecord(nil, &rec)}},
		{Name: "seed-keyframe", Args: [][]byte{statefmt.EncodeRecord(nil, &key)}},
		{Name: "seed-garbage", Args: [][]byte{[]byte("HER\x01garbage-bytes-here-0123456789")}},
	}
	return jsonSeeds, binarySeeds, recordSeeds
}

// frameSeeds returns the seeds of FuzzFrames: the raw length (3 bytes, little endian), then a
// zstd-frames payload (its frames are not decompressed by the parser, so any bytes do).
func frameSeeds() []fuzzseed.Seed {
	withLen := func(rawLen int, payload []byte) [][]byte {
		return [][]byte{append([]byte{byte(rawLen), byte(rawLen >> 8), byte(rawLen >> 16)}, payload...)}
	}
	three := append(statefmt.AppendFrameTable(nil, []int{1 << 20, 1 << 20, 5}, []int{4, 3, 2}), "aaaabbbcc"...)
	return []fuzzseed.Seed{
		{Name: "seed-three-frames", Args: withLen(2<<20+5, three)},
		{Name: "seed-one-frame", Args: withLen(7, append(statefmt.AppendFrameTable(nil, []int{7}, []int{3}), "xyz"...))},
		{Name: "seed-zero-frames", Args: withLen(0, []byte{0})},
		{Name: "seed-short-table", Args: withLen(2<<20+5, three[:4])},
	}
}

func mustRead(name string) []byte {
	b, err := os.ReadFile(name)
	mustNot(err)
	return b
}

func mustNot(err error) {
	if err != nil {
		panic(err)
	}
}

// TestSeedCorpus fails when the committed corpus differs from the seeds above; -rewrite
// updates it.
func TestSeedCorpus(t *testing.T) {
	seedJSON, err := os.ReadFile("testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	v0JSON, err := os.ReadFile("testdata/v0-draft.json")
	if err != nil {
		t.Fatal(err)
	}
	js, bin, rec := stateSeeds(seedJSON, v0JSON)
	fuzzseed.Check(t, "./statefmt", map[string][]fuzzseed.Seed{"FuzzStateJSON": js, "FuzzStateBinary": bin,
		"FuzzRecord": rec, "FuzzFrames": frameSeeds()})
}
