package statefmt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/stategen"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/leanovate/gopter/prop"
)

func readSeed(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDocumentedJSONExampleReadsAsIs(t *testing.T) {
	s, err := statefmt.DecodeJSON(readSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.HarnessID != "harness-abc123" || s.AgentName != "MARS" || s.Status != statefmt.StatusRunning ||
		s.Plan == nil || len(s.Plan.Steps) != 2 || s.CurrentStepIndex != 1 || s.CheckpointCount != 2 ||
		len(s.SubAgentIDs) != 1 || s.AgentLoopSnapshot != nil || s.LastCheckpointAt == nil {
		t.Fatalf("seed example decoded wrong: %+v", s)
	}
	st1, st2 := s.Plan.Steps[0], s.Plan.Steps[1]
	if st1.Output == nil || *st1.Output != "Schema created" || st2.Output != nil || !st2.Critical ||
		!reflect.DeepEqual(st2.Dependencies, []string{"step-1"}) || st1.Dependencies != nil {
		t.Fatalf("steps decoded wrong: %+v %+v", st1, st2)
	}
	if want := time.Date(2026, 2, 20, 10, 5, 0, 0, time.UTC); !s.UpdatedAt.Equal(want) {
		t.Fatalf("updatedAt %v", s.UpdatedAt)
	}
	// Writing it back keeps the seed's shape: [] and {} for the empty collections, null for null.
	out, err := statefmt.EncodeJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"toolCallHistory": []`, `"subAgentResults": {}`, `"agentLoopSnapshot": null`,
		`"dependencies": []`, `"schemaVersion": 1`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("re-encoded seed lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), `"output": null`) {
		t.Errorf("absent step output written as null:\n%s", out)
	}
}

func TestDecodeJSONRefuses(t *testing.T) {
	seed := string(readSeed(t))
	edit := func(old, new string) string {
		if !strings.Contains(seed, old) {
			t.Fatalf("seed lacks %q", old)
		}
		return strings.Replace(seed, old, new, 1)
	}
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"schema 99", edit(`"schemaVersion": 1`, `"schemaVersion": 99`), []string{"schemaVersion 99", "supported versions: 0 (migrated), 1"}},
		{"schema missing", edit(`"schemaVersion": 1,`, ``), []string{"schemaVersion is missing", "supported versions"}},
		{"schema not a number", edit(`"schemaVersion": 1`, `"schemaVersion": "one"`), []string{`schemaVersion "one" is not a version number`}},
		{"schema fractional", edit(`"schemaVersion": 1`, `"schemaVersion": 1.5`), []string{"1.5 is not a version number"}},
		{"unknown top-level field", edit(`"checkpointCount": 2`, `"checkpointCount": 2, "extra": true`), []string{`unknown field "extra"`}},
		{"unknown step field", edit(`"critical": true,`, `"critical": true, "priority": 3,`), []string{`unknown field "priority"`}},
		{"unknown tool-call field", edit(`"toolCallHistory": []`, `"toolCallHistory": [{"callName":"x","arguments":{},"result":{"success":true},"duration":1,"retryCount":0,"timestamp":"2026-02-20T10:00:00Z","bogus":1}]`), []string{`unknown field "bogus"`}},
		{"unknown result field", edit(`"toolCallHistory": []`, `"toolCallHistory": [{"callName":"x","arguments":{},"result":{"success":true,"bogus":1},"duration":1,"retryCount":0,"timestamp":"2026-02-20T10:00:00Z"}]`), []string{`unknown field "bogus"`}},
		{"negative duration", edit(`"toolCallHistory": []`, `"toolCallHistory": [{"callName":"x","arguments":{},"result":{"success":true},"duration":-1,"retryCount":0,"timestamp":"2026-02-20T10:00:00Z"}]`), []string{"duration"}},
		{"bad status", edit(`"status": "running",`, `"status": "sleeping",`), []string{"status", `"sleeping"`}},
		{"bad step status", edit(`"status": "completed"`, `"status": "done"`), []string{"plan.steps[0].status"}},
		{"duplicate step id", edit(`"id": "step-2"`, `"id": "step-1"`), []string{"plan.steps[1].id", "used by an earlier step"}},
		{"unknown dependency", edit(`"dependencies": ["step-1"]`, `"dependencies": ["step-9"]`), []string{`"step-9" is not a step`}},
		{"empty harness id", edit(`"harnessId": "harness-abc123"`, `"harnessId": ""`), []string{"harnessId", "empty"}},
		{"bad timestamp", edit(`"createdAt": "2026-02-20T10:00:00Z",
  "updatedAt"`, `"createdAt": "yesterday",
  "updatedAt"`), []string{"line 7"}},
		{"syntax error", edit(`"taskId": "p2-t1",`, `"taskId": "p2-t1",,`), []string{"line 5"}},
		{"trailing data", seed + `{}`, []string{"line 41", "after top-level value"}},
		{"not an object", `[1,2]`, []string{"invalid HarnessState JSON"}},
	} {
		_, err := statefmt.DecodeJSON([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
}

func TestMigrationFromV0(t *testing.T) {
	b, err := os.ReadFile("testdata/v0-draft.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := statefmt.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.SchemaVersion != 1 || s.HarnessID != "harness-old1" || s.AgentName != "MARS" || s.Status != statefmt.StatusPaused ||
		s.CheckpointCount != 4 || s.TotalToolCalls != 2 || len(s.ToolCallHistory) != 2 || s.Plan != nil {
		t.Fatalf("migrated state wrong: %+v", s)
	}
	r0, r1 := s.ToolCallHistory[0], s.ToolCallHistory[1]
	if r0.CallName != "read_file" || string(r0.Arguments) != `{"limit":40,"path":"notes.md"}` || r0.Duration != 1500*time.Microsecond ||
		r1.RetryCount != 1 || r1.Result.ErrorKind != "permanent" || r1.Duration != 2300*time.Millisecond {
		t.Fatalf("migrated records wrong: %+v %+v", r0, r1)
	}
	// The +01:00 offset is normalised to UTC, with its sub-second part.
	if want := time.Date(2026, 1, 5, 21, 0, 0, 125e6, time.UTC); s.CreatedAt != want {
		t.Fatalf("createdAt %v, want %v", s.CreatedAt, want)
	}
	// A migrated state re-encodes as version 1 and reads back equal.
	out, _ := statefmt.EncodeJSON(s)
	back, err := statefmt.DecodeJSON(out)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip after migration: %v", err)
	}
}

func TestSubSecondPrecisionAndEmptyOutput(t *testing.T) {
	s, _ := statefmt.DecodeJSON(readSeed(t))
	ts := time.Date(2026, 2, 20, 10, 0, 0, 123456789, time.UTC)
	empty := ""
	s.CreatedAt = ts
	s.Plan.Steps[1].Output = &empty
	b, _ := statefmt.EncodeJSON(s)
	if !strings.Contains(string(b), "10:00:00.123456789Z") || !strings.Contains(string(b), `"output": ""`) {
		t.Fatalf("precision or empty output lost:\n%s", b)
	}
	back, err := statefmt.DecodeJSON(b)
	if err != nil || back.CreatedAt != ts || back.Plan.Steps[1].Output == nil || *back.Plan.Steps[1].Output != "" {
		t.Fatalf("round trip lost precision or the empty output: %v", err)
	}
}

func TestValidationErrorNamesTheField(t *testing.T) {
	s, _ := statefmt.DecodeJSON(readSeed(t))
	s.TotalToolCalls = -1
	var ve *statefmt.ValidationError
	if err := s.Validate(); !errors.As(err, &ve) || ve.Field != "totalToolCalls" {
		t.Fatalf("got %v", err)
	}
}

func TestAPlanCycleOfThousandsOfStepsIsNamedInALine(t *testing.T) {
	s, _ := statefmt.DecodeJSON(readSeed(t))
	const n = 5000
	steps := make([]statefmt.ExecutionStep, n)
	for i := range steps {
		steps[i] = statefmt.ExecutionStep{ID: fmt.Sprintf("s%d", i+1), Description: "x", AssignedAgent: "A",
			Status: statefmt.StepPending, Dependencies: []string{fmt.Sprintf("s%d", (i+1)%n+1)}}
	}
	s.Plan.Steps = steps
	s.CurrentStepIndex = 0
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "form a cycle: s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7 -> s8 -> s9 -> s10 -> (4,990 more steps) -> s1") || len(err.Error()) > 300 {
		t.Fatalf("a cycle of %d steps: %.400v", n, err)
	}
}

func TestCanonicalJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"b": 1, "a": [true, null, "x<y&z"]}`: `{"a":[true,null,"x<y&z"],"b":1}`,
		` 1.50 `:                               `1.50`,
		`"é\u00e9"`:                            `"éé"`,
		`{"big": 123456789012345678901234567890}`: `{"big":123456789012345678901234567890}`,
	} {
		got, err := statefmt.CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `{`, `{} {}`, `nul`} {
		if _, err := statefmt.CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) accepted", bad)
		}
	}
}

// EncodeJSON makes in fewer passes exactly what encoding/json's indenting encoder writes.
func TestPropertyEncodeJSONIsTheIndentingEncodersOutput(t *testing.T) {
	ps := props(t, 200)
	ps.Property("EncodeJSON == json.Encoder with SetIndent", prop.ForAll(func(s *statefmt.HarnessState) bool {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			t.Log(err)
			return false
		}
		got, err := statefmt.EncodeJSON(s)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Logf("EncodeJSON differs (%v)", err)
			return false
		}
		return true
	}, genState()))
	ps.TestingRun(t)
}

// A plan writes its steps itself; a field added to ExecutionPlan must be written there too.
func TestPlanJSONWritesEveryFieldOfAPlan(t *testing.T) {
	if n := reflect.TypeOf(statefmt.ExecutionPlan{}).NumField(); n != 3 {
		t.Fatalf("ExecutionPlan has %d fields; ExecutionPlan.MarshalJSON writes 3: add the new ones there", n)
	}
}

// indentingEncoder is the reference EncodeJSON is held to.
func indentingEncoder(s *statefmt.HarnessState) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(s)
	return b.Bytes(), err
}

// The strings and numbers the generator rarely draws: every control byte, invalid UTF-8, the
// JavaScript line separators, HTML characters, the smallest durations and amounts, negative ones.
func TestEncodeJSONWritesHostileTextAndEdgeNumbersAsEncodingJSON(t *testing.T) {
	var ctl strings.Builder
	for c := range 0x20 {
		ctl.WriteByte(byte(c))
	}
	texts := []string{"", ctl.String(), "\x7f", "bad \xff\xfe utf-8 \xc3", "trail \xe2\x80", "\u2028 and \u2029",
		`<a href="x">&amp;</a>`, `back\slash "quote"`, "é中🚀\ufeff\U0010FFFF", strings.Repeat("x\n", 3000)}
	t0 := time.Date(2026, 11, 23, 5, 0, 0, 123456789, time.UTC)
	for i, text := range texts {
		out := text
		s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: text, AgentName: text, TaskID: "t", Status: statefmt.StatusRunning,
			CreatedAt: t0, UpdatedAt: t0, StatusReason: text,
			Plan: &statefmt.ExecutionPlan{TaskID: text, CreatedAt: t0, Steps: []statefmt.ExecutionStep{
				{ID: "a", Description: text, Dependencies: []string{text}, Status: statefmt.StepFailed, Output: &out, Error: &out}}},
			ToolCallHistory: []statefmt.ToolCallRecord{
				{CallName: text, Arguments: statefmt.JSONValue(`{"k":["` + "\u2028<>&" + `",1e-7,{}]}`), Duration: 1,
					Result: statefmt.ToolResult{Output: text, Error: text, Data: statefmt.JSONValue(`[]`)}, Timestamp: t0},
				{CallName: "neg", Arguments: statefmt.JSONValue(`null`), Duration: -time.Duration(i) * time.Microsecond, Timestamp: t0}},
			SubAgentIDs:     []string{text},
			SubAgentResults: map[string]statefmt.SubAgentResult{text: {HarnessID: text, Output: &out}, "z" + text: {}},
			AgentLoopSnapshot: &statefmt.AgentLoopSnapshot{Scratchpad: text, Messages: []statefmt.Message{{Role: text, Content: text,
				ToolCalls: []statefmt.MessageToolCall{{ID: text, Name: text, Arguments: text}}}}},
			Budget: &statefmt.Budget{WallClock: 1, WallClockUsed: time.Duration(1 << 62), CostMicroUSD: 1, CostMicroUSDUsed: 1 << 40},
			Gates:  []statefmt.Gate{{ID: text, Reason: text, CreatedAt: t0}},
		}
		want, err := indentingEncoder(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := statefmt.EncodeJSON(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("text %q: EncodeJSON differs from encoding/json (%v):\n%s\nwant:\n%s", text, err, got, want)
		}
	}
}

// A free-form value that is not JSON, or a time RFC 3339 cannot write, is refused as encoding/json
// refuses it: an error and no output.
func TestEncodeJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	for name, s := range map[string]*statefmt.HarnessState{
		"invalid arguments": {CreatedAt: t0, UpdatedAt: t0, ToolCallHistory: []statefmt.ToolCallRecord{{Arguments: statefmt.JSONValue(`{"a":`), Timestamp: t0}}},
		"empty arguments":   {CreatedAt: t0, UpdatedAt: t0, SideEffects: []statefmt.SideEffect{{Arguments: statefmt.JSONValue{}, StartedAt: t0}}},
		"year 10000":        {CreatedAt: t0.AddDate(8000, 0, 0), UpdatedAt: t0},
	} {
		if _, err := indentingEncoder(s); err == nil {
			t.Fatalf("%s: encoding/json accepted it", name)
		}
		if out, err := statefmt.EncodeJSON(s); err == nil || out != nil {
			t.Errorf("%s: EncodeJSON gave %d bytes, error %v; want an error and nothing", name, len(out), err)
		}
	}
}

// bigState is a state like a long run's: a 1,000-step plan with outputs, and a history of
// realistic tool results about 2 MB long.
func bigState() *statefmt.HarnessState {
	s := stategen.Reference(rand.New(rand.NewPCG(1, 2)), 2<<20)
	s.Plan.Steps = nil
	for i := range 1000 {
		out := fmt.Sprintf("read %d lines\n\tof text", i)
		st := statefmt.ExecutionStep{ID: fmt.Sprintf("s%05d", i+1), Description: "read a file", AssignedAgent: "A",
			Status: statefmt.StepCompleted, Output: &out, Attempts: 1}
		if i > 0 {
			st.Dependencies = []string{fmt.Sprintf("s%05d", i)}
		}
		s.Plan.Steps = append(s.Plan.Steps, st)
	}
	return s
}

// On a large state EncodeJSON writes encoding/json's bytes into one buffer sized up front: a
// handful of allocations, not a growing buffer and a copy per nested value.
func TestEncodeJSONOfALargeStateIsOneBufferOfEncodingJSONsBytes(t *testing.T) {
	s := bigState()
	want, err := indentingEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 2<<20 {
		t.Fatalf("the large state's JSON is only %d bytes", len(want))
	}
	got, err := statefmt.EncodeJSON(s)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeJSON differs from encoding/json on a large state (%v)", err)
	}
	if cap(got) > len(got)*5/4 {
		t.Errorf("EncodeJSON's buffer is %d bytes for %d of JSON: sized far over", cap(got), len(got))
	}
	if allocs := testing.AllocsPerRun(3, func() { _, _ = statefmt.EncodeJSON(s) }); allocs > 4 {
		t.Errorf("EncodeJSON of a large state made %v allocations; want the buffer and a few more", allocs)
	}
}

func BenchmarkEncodeJSONLargeState(b *testing.B) {
	s := bigState()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := statefmt.EncodeJSON(s); err != nil {
			b.Fatal(err)
		}
	}
}

// EncodeJSON writes each type field by field; a field added to one of them must be written there
// too (jsonwrite.go), and the count here raised with it.
func TestEncodeJSONWritesEveryFieldOfEachType(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{
		{statefmt.HarnessState{}, 25}, {statefmt.ExecutionPlan{}, 3}, {statefmt.ExecutionStep{}, 11},
		{statefmt.ToolCallRecord{}, 6}, {statefmt.ToolResult{}, 6}, {statefmt.SubAgentResult{}, 8},
		{statefmt.AgentLoopSnapshot{}, 5}, {statefmt.Message{}, 5}, {statefmt.MessageToolCall{}, 3},
		{statefmt.Budget{}, 7}, {statefmt.Gate{}, 7}, {statefmt.SideEffect{}, 7},
	} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.fields {
			t.Errorf("%T has %d fields; EncodeJSON's writer writes %d: write the new ones in jsonwrite.go", c.v, n, c.fields)
		}
	}
}
