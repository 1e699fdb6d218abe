package fuzz

import (
	"bytes"
	"math/rand/v2"
	"strings"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/internal/workload"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Seed is one named corpus entry: the arguments of a fuzz target, in order.
type Seed struct {
	Name string
	Args [][]byte
}

// DeltaSeeds returns the seeds of FuzzDeltaApply (base, delta) and FuzzDeltaRoundTrip
// (base, target). Deltas are encoded with the fallback's literal encoder and hand-forged, so the
// corpus does not depend on which engine generated it.
func DeltaSeeds() (apply, roundTrip []Seed) {
	r := rand.New(rand.NewPCG(11, 22))
	base := workload.Text(r, 600)
	target := workload.ScatteredEdits(r, base, 4)
	lit := bridge.EncodeLiteral(len(base), target)
	apply = []Seed{
		{"seed-empty", [][]byte{nil, nil}},
		{"seed-literal", [][]byte{base, lit}},
		{"seed-literal-empty-base", [][]byte{nil, bridge.EncodeLiteral(0, []byte("hello"))}},
		{"seed-truncated", [][]byte{base, lit[:len(lit)/2]}},
		{"seed-trailing", [][]byte{base, append(bytes.Clone(lit), 0)}},
		{"seed-copy", [][]byte{[]byte("0123456789abcdefghij"), []byte("ETD\x01\x14\x0a\x15\x00")}},
		{"seed-copy-past-base", [][]byte{[]byte("0123456789"), []byte("ETD\x01\x0a\x0a\x15\x0a")}},
		{"seed-huge-target", [][]byte{[]byte("abc"), []byte("ETD\x01\x03\xff\xff\xff\xff\x0f")}},
		{"seed-overlong-varint", [][]byte{nil, []byte("ETD\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")}},
		{"seed-bad-version", [][]byte{nil, []byte("ETD\x09\x00\x00")}},
	}
	roundTrip = []Seed{
		{"seed-empty", [][]byte{nil, nil}},
		{"seed-edits", [][]byte{base, target}},
		{"seed-grow", [][]byte{base[:100], base}},
		{"seed-shrink", [][]byte{base, base[:100]}},
		{"seed-unrelated", [][]byte{workload.Random(r, 300), workload.Random(r, 300)}},
		{"seed-repetitive", [][]byte{bytes.Repeat([]byte("ab"), 500), bytes.Repeat([]byte("ab"), 510)}},
	}
	return apply, roundTrip
}

// StateSeeds returns the seeds of FuzzStateJSON, FuzzStateBinary and FuzzRecord. seedJSON and
// v0JSON are statefmt/testdata's seed-design example and schema-0 fixture.
func StateSeeds(seedJSON, v0JSON []byte) (jsonSeeds, binarySeeds, recordSeeds []Seed) {
	r := rand.New(rand.NewPCG(5, 6))
	small := stategen.State(r, stategen.Small)
	smallJSON, err := statefmt.EncodeJSON(small)
	must(err)
	seedState, err := statefmt.DecodeJSON(seedJSON)
	must(err)
	seedBin, err := statefmt.EncodeBinary(seedState)
	must(err)
	smallBin, err := statefmt.EncodeBinary(small)
	must(err)
	jsonSeeds = []Seed{
		{"seed-design-example", [][]byte{seedJSON}},
		{"seed-schema-v0", [][]byte{v0JSON}},
		{"seed-generated", [][]byte{smallJSON}},
		{"seed-schema-99", [][]byte{bytes.Replace(seedJSON, []byte(`"schemaVersion": 1`), []byte(`"schemaVersion": 99`), 1)}},
		{"seed-truncated", [][]byte{seedJSON[:len(seedJSON)/2]}},
		{"seed-empty-object", [][]byte{[]byte(`{}`)}},
	}
	binarySeeds = []Seed{
		{"seed-design-example", [][]byte{seedBin}},
		{"seed-generated", [][]byte{smallBin}},
		{"seed-truncated", [][]byte{smallBin[:len(smallBin)/2]}},
		{"seed-header-only", [][]byte{[]byte("HES\x01")}},
	}
	rec := statefmt.Record{Kind: statefmt.KindDelta, Seq: 2, BaseSeq: 1, Prefix: 4, StateHash: 7, ChainHash: 9,
		Compression: statefmt.CompressionZstd, RawLen: 12, StateFormat: 1, DeltaFormat: 1, Payload: []byte("zstd-bytes")}
	key := statefmt.Record{Kind: statefmt.KindKeyframe, Seq: 1, BaseSeq: 1, StateHash: 3, ChainHash: 4,
		RawLen: uint64(len(seedBin)), StateFormat: 1, Payload: seedBin}
	recordSeeds = []Seed{
		{"seed-delta", [][]byte{statefmt.EncodeRecord(nil, &rec)}},
		{"seed-keyframe", [][]byte{statefmt.EncodeRecord(nil, &key)}},
		{"seed-garbage", [][]byte{[]byte("HER\x01garbage-bytes-here-0123456789")}},
	}
	return jsonSeeds, binarySeeds, recordSeeds
}

// FrameSeeds returns the seeds of FuzzFrames: the raw length (3 bytes, little endian), then a
// zstd-frames payload (its frames are not decompressed by the parser, so any bytes do).
func FrameSeeds() []Seed {
	withLen := func(rawLen int, payload []byte) [][]byte {
		return [][]byte{append([]byte{byte(rawLen), byte(rawLen >> 8), byte(rawLen >> 16)}, payload...)}
	}
	three := append(statefmt.AppendFrameTable(nil, []int{1 << 20, 1 << 20, 5}, []int{4, 3, 2}), "aaaabbbcc"...)
	return []Seed{
		{"seed-three-frames", withLen(2<<20+5, three)},
		{"seed-one-frame", withLen(7, append(statefmt.AppendFrameTable(nil, []int{7}, []int{3}), "xyz"...))},
		{"seed-zero-frames", withLen(0, []byte{0})},
		{"seed-short-table", withLen(2<<20+5, three[:4])},
	}
}

// AgentOutputSeeds returns the seeds of FuzzAgentOutput (output, promise): the output formats of
// common CLI agents, a model server's answers, rate-limit messages and broken JSON.
func AgentOutputSeeds() []Seed {
	seed := func(name, out, promise string) Seed { return Seed{name, [][]byte{[]byte(out), []byte(promise)}} }
	return []Seed{
		seed("seed-plain", "working\n<promise>DONE</promise>\n", "DONE"),
		seed("seed-ansi", "\x1b[1;32mdone\x1b[0m\r\n\x1b]0;t\x07DONE\n", "DONE"),
		seed("seed-claude-json", `{"type":"result","is_error":false,"result":"ok <promise>DONE</promise>"}`, "DONE"),
		seed("seed-stream-json", "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n{\"type\":\"result\",\"result\":\"bye\"}\n", "bye"),
		seed("seed-broken-json", `{"result": "unterminated`, "x"),
		seed("seed-deep-json", strings.Repeat("[", 200)+strings.Repeat("]", 200), "x"),
		seed("seed-rate-limit", "Claude AI usage limit reached|1795000000", "DONE"),
		seed("seed-retry-in", "You've hit your usage limit. Try again in 2 hours 5 minutes.", ""),
		seed("seed-reset-clock", "rate limited, resets at 13:99pm", ""),
		seed("seed-chat-response", `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}}],"usage":{"total_tokens":5}}`, ""),
		seed("seed-chat-no-choices", `{"choices":[]}`, ""),
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
