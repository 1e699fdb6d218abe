package fuzz

import (
	"bytes"
	"math/rand/v2"
	"strings"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/fuzzseed"
	"github.com/harness-edge/harness-edge/internal/workload"
)

// DeltaSeeds returns the seeds of FuzzDeltaApply (base, delta) and FuzzDeltaRoundTrip
// (base, target). Deltas are encoded with the fallback's literal encoder and hand-forged, so the
// corpus does not depend on which engine generated it.
func DeltaSeeds() (apply, roundTrip []fuzzseed.Seed) {
	r := rand.New(rand.NewPCG(11, 22))
	base := workload.Text(r, 600)
	target := workload.ScatteredEdits(r, base, 4)
	lit := bridge.EncodeLiteral(len(base), target)
	apply = []fuzzseed.Seed{
		{Name: "seed-empty", Args: [][]byte{nil, nil}},
		{Name: "seed-literal", Args: [][]byte{base, lit}},
		{Name: "seed-literal-empty-base", Args: [][]byte{nil, bridge.EncodeLiteral(0, []byte("hello"))}},
		{Name: "seed-truncated", Args: [][]byte{base, lit[:len(lit)/2]}},
		{Name: "seed-trailing", Args: [][]byte{base, append(bytes.Clone(lit), 0)}},
		{Name: "seed-copy", Args: [][]byte{[]byte("0123456789abcdefghij"), []byte("ETD\x01\x14\x0a\x15\x00")}},
		{Name: "seed-copy-past-base", Args: [][]byte{[]byte("0123456789"), []byte("ETD\x01\x0a\x0a\x15\x0a")}},
		{Name: "seed-huge-target", Args: [][]byte{[]byte("abc"), []byte("ETD\x01\x03\xff\xff\xff\xff\x0f")}},
		{Name: "seed-overlong-varint", Args: [][]byte{nil, []byte("ETD\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")}},
		{Name: "seed-bad-version", Args: [][]byte{nil, []byte("ETD\x09\x00\x00")}},
	}
	roundTrip = []fuzzseed.Seed{
		{Name: "seed-empty", Args: [][]byte{nil, nil}},
		{Name: "seed-edits", Args: [][]byte{base, target}},
		{Name: "seed-grow", Args: [][]byte{base[:100], base}},
		{Name: "seed-shrink", Args: [][]byte{base, base[:100]}},
		{Name: "seed-unrelated", Args: [][]byte{workload.Random(r, 300), workload.Random(r, 300)}},
		{Name: "seed-repetitive", Args: [][]byte{bytes.Repeat([]byte("ab"), 500), bytes.Repeat([]byte("ab"), 510)}},
	}
	return apply, roundTrip
}

// AgentOutputSeeds returns the seeds of FuzzAgentOutput (output, promise): the output formats of
// common CLI agents, a model server's answers, rate-limit messages and broken JSON.
func AgentOutputSeeds() []fuzzseed.Seed {
	seed := func(name, out, promise string) fuzzseed.Seed {
		return fuzzseed.Seed{Name: name, Args: [][]byte{[]byte(out), []byte(promise)}}
	}
	return []fuzzseed.Seed{
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

// TaskFileSeeds returns the seeds of FuzzTaskFile: small task files in YAML and JSON, JSON with
// escaped surrogate pairs and a lone half, flow and block styles, anchors, and broken ones.
func TaskFileSeeds() []fuzzseed.Seed {
	seed := func(name, src string) fuzzseed.Seed { return fuzzseed.Seed{Name: name, Args: [][]byte{[]byte(src)}} }
	return []fuzzseed.Seed{
		seed("seed-yaml", "id: t\nprompt: Read the notes.\nagent: A\nautonomy: 3\nretry: {maxRetries: 2, base: 200ms}\n"+
			"agents:\n  A:\n    driver: script\n    tools: [read_file]\n    script:\n      plan:\n        - {id: s1, description: read, agent: A}\n"+
			"        - {id: s2, description: count, agent: A, dependsOn: [s1], critical: true}\n      steps:\n        s1:\n          - {tool: read_file, args: {path: notes.md, offset: 2, limit: 3}}\n"),
		seed("seed-json-escapes", `{"id": "e", "prompt": "ship it \ud83d\ude80 caf\u00e9 \\ud83d", "agent": "A", "agents": {"A": {"driver": "script", "script": {"steps": {"*": [{"output": "\uD834\uDD1E"}]}}}}}`),
		seed("seed-json-lone-surrogate", `{"id": "e", "prompt": "a \ud800 b", "agent": "A"}`),
		seed("seed-anchors", "agents:\n  A: &a {driver: script, script: {}}\n  B: *a\nagent: A\nprompt: &p x\n"),
		seed("seed-block-scalar", "id: b\nagent: A\nprompt: |\n  line one\n  \"quoted\" \\ud83d\n\nagents: {A: {driver: script, script: {}}}\n"),
		seed("seed-broken", "{\"id\": \"x\", \"prompt\": \"a\""),
		seed("seed-durations", "agent: A\nbudget: {wallClock: 90m, toolCalls: 10}\ntools:\n  bash: {timeout: 1h30m}\nagents: {A: {driver: script, script: {}}}\n"),
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
