package statefmt_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

func TestEncodeBinaryRefusesInvalidStates(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name string
		mod  func(s *statefmt.HarnessState)
		want string
	}{
		{"invalid UTF-8", func(s *statefmt.HarnessState) { s.TaskID = "ok\xffno" }, "taskId is not valid UTF-8"},
		{"invalid UTF-8 in a record", func(s *statefmt.HarnessState) {
			s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
			s.ToolCallHistory[len(s.ToolCallHistory)-1].Result.Output = "\xc3"
		}, "toolCallHistory.result.output is not valid UTF-8"},
		{"negative counter", func(s *statefmt.HarnessState) { s.CheckpointCount = -3 }, "checkpointCount is negative"},
		{"unknown status", func(s *statefmt.HarnessState) { s.Status = "sleeping" }, "status sleeping is not one of"},
	} {
		s := stategen.State(r, stategen.Small)
		c.mod(s)
		_, err := statefmt.EncodeBinary(s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestDecodeBinaryRefusesDamage(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	s := stategen.State(r, stategen.Medium)
	for len(s.ToolCallHistory) < 3 {
		s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
	}
	good, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(good); n += 1 + n/64 {
		if _, err := statefmt.DecodeBinary(good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(good))
		}
	}
	forge := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	end := len(good) - 16
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"bad magic", forge(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"bad version", forge(func(b []byte) []byte { b[3] = 7; return b }), fmt.Sprintf("binary format version 7 is not supported (supported: 1 to %d): a newer harness-edge wrote it", statefmt.BinaryFormatVersion)},
		{"history end past the state", forge(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[end:], uint64(len(b)))
			return b
		}), "history end offset"},
		{"forged record count", forge(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[end+8:], 1<<60)
			return b
		}), "cannot fit"},
		{"bytes inserted before the trailer", append(append(bytes.Clone(good[:end]), 0), good[end:]...), "trailing bytes"},
	} {
		_, err := statefmt.DecodeBinary(c.b)
		var de *statefmt.DecodeError
		if err == nil || !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a DecodeError saying %q", c.name, err, c.want)
		}
	}
}

// TestIncrementalEncodingKeepsTheHistory checks the layout's promise on a long history: one
// appended record leaves everything before the old end of the history in place, and the
// previous tail is small (the rest of the state, not the history).
func TestIncrementalEncodingKeepsTheHistory(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	s := stategen.State(r, stategen.Small)
	for range 2000 {
		s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
	}
	var enc statefmt.BinaryEncoder
	first, err := enc.Encode(s)
	if err != nil || first.Prefix != 0 || first.Inserted != 0 {
		t.Fatalf("first encoding: prefix %d, inserted %d, %v", first.Prefix, first.Inserted, err)
	}
	before := len(first.Bytes)
	s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
	s.CheckpointCount++
	inc, err := enc.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if prevTail := before - inc.Prefix; prevTail < 0 || prevTail > 4096 || inc.Prefix < before*9/10 {
		t.Fatalf("prefix %d of %d bytes, previous tail %d bytes: the history was not kept in place", inc.Prefix, before, prevTail)
	}
}

// States written in binary layouts 1 (before the budget's cost fields), 2 (step outputs in the
// plan) and 3 (step outputs always as text of their own) still decode, to the state their JSON
// says; re-encoded, they are written in the current layout.
func TestOlderBinaryLayoutsStillDecode(t *testing.T) {
	for _, v := range []int{1, 2, 3, 4} {
		old, err := os.ReadFile(fmt.Sprintf("testdata/state-v%d.bin", v))
		if err != nil {
			t.Fatal(err)
		}
		js, err := os.ReadFile(fmt.Sprintf("testdata/state-v%d.json", v))
		if err != nil {
			t.Fatal(err)
		}
		if int(old[3]) != v {
			t.Fatalf("the fixture is layout %d, want %d", old[3], v)
		}
		got, err := statefmt.DecodeBinary(old)
		if err != nil {
			t.Fatalf("layout %d: %v", v, err)
		}
		want, err := statefmt.DecodeJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("layout %d decodes to\n%+v\nwant\n%+v", v, got, want)
		}
		again, err := statefmt.EncodeBinary(got)
		if err != nil {
			t.Fatal(err)
		}
		if again[3] != statefmt.BinaryFormatVersion {
			t.Fatalf("re-encoded in layout %d", again[3])
		}
		if back, err := statefmt.DecodeBinary(again); err != nil || !reflect.DeepEqual(back, want) {
			t.Fatalf("layout %d: the re-encoded state does not read back: %v", v, err)
		}
	}
}

// TestIncrementalEncodingKeepsOutputsOutOfTheTail runs a long plan the way a harness does, one
// step completing per checkpoint with a large output, and checks that what follows the
// unchanged prefix stays a few bytes per step: the steps and their outputs, like the tool calls,
// are written to the log when they change and never again.
func TestIncrementalEncodingKeepsOutputsOutOfTheTail(t *testing.T) {
	const steps = 300
	s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: "h", AgentName: "a", TaskID: "t", Status: statefmt.StatusRunning,
		Plan: &statefmt.ExecutionPlan{TaskID: "t"}}
	for i := range steps {
		st := statefmt.ExecutionStep{ID: fmt.Sprintf("s%03d", i), AssignedAgent: "a", Status: statefmt.StepPending,
			Description: strings.Repeat("a long description of what the step does; ", 5)}
		if i > 0 {
			st.Dependencies = []string{fmt.Sprintf("s%03d", i-1)}
		}
		s.Plan.Steps = append(s.Plan.Steps, st)
	}
	var enc statefmt.BinaryEncoder
	first, err := enc.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	last := []byte(nil)
	if len(first.Bytes) < steps*200 {
		t.Fatalf("the first encoding is %d bytes, want the whole plan", len(first.Bytes))
	}
	for i := range steps {
		out := strings.Repeat(fmt.Sprintf("line %d of step %d\n", i, i), 200) // ~4 KB
		s.Plan.Steps[i].Status, s.Plan.Steps[i].Output = statefmt.StepCompleted, &out
		s.ToolCallHistory = append(s.ToolCallHistory, statefmt.ToolCallRecord{CallName: "read_file",
			Result: statefmt.ToolResult{Success: true, Output: out}})
		s.TotalToolCalls, s.CurrentStepIndex = len(s.ToolCallHistory), min(i+1, steps-1)
		inc, err := enc.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if inc.Prefix == 0 {
			t.Fatalf("step %d: the encoder started over", i)
		}
		if tail := len(inc.Bytes) - inc.Prefix; tail > 3*len(out)+4*steps+512 {
			t.Fatalf("step %d: %d bytes after the unchanged prefix, for a %d-step plan and a %d-byte output", i, tail, steps, len(out))
		}
		if prevTail := len(last) - inc.Prefix; last != nil && prevTail > 4*steps+256 {
			t.Fatalf("step %d: the previous tail is %d bytes, for a %d-step plan", i, prevTail, steps)
		}
		last = inc.Bytes
	}
	got, err := statefmt.DecodeBinary(last)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := statefmt.DecodeBinary(mustEncode(t, s))
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the last incremental encoding decodes to another state than the full one")
	}
}

// TestEncoderStartsOverWhenDeadOutputsPileUp rewrites one step's output again and again: each
// version is appended to the log, and once the outputs no step refers to outweigh the live
// ones (and 1 MiB), the encoder starts over, so the encoding stays bounded.
func TestEncoderStartsOverWhenDeadOutputsPileUp(t *testing.T) {
	out := strings.Repeat("x", 64<<10)
	s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: "h", AgentName: "a", TaskID: "t", Status: statefmt.StatusRunning,
		Plan: &statefmt.ExecutionPlan{TaskID: "t", Steps: []statefmt.ExecutionStep{{ID: "s", AssignedAgent: "a", Status: statefmt.StepCompleted, Output: &out}}}}
	var enc statefmt.BinaryEncoder
	restarts, biggest := 0, 0
	for i := range 100 {
		o := fmt.Sprintf("%d%s", i, out)
		s.Plan.Steps[0].Output = &o
		inc, err := enc.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && inc.Prefix == 0 {
			restarts++
		}
		biggest = max(biggest, len(inc.Bytes))
		if got, err := statefmt.DecodeBinary(inc.Bytes); err != nil || *got.Plan.Steps[0].Output != o {
			t.Fatalf("version %d does not read back: %v", i, err)
		}
	}
	if restarts == 0 || biggest > 3<<20 {
		t.Fatalf("%d restarts, largest encoding %d bytes: dead outputs were kept", restarts, biggest)
	}
}

func mustEncode(t *testing.T, s *statefmt.HarnessState) []byte {
	t.Helper()
	b, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The cost budget is exact in millionths of a dollar through JSON and binary.
func TestBudgetCostRoundTrips(t *testing.T) {
	for _, usd := range []float64{0, 0.000001, 0.0125, 1.5, 3.14159, 12345.678901} {
		micro, ok := statefmt.MicroUSD(usd)
		if !ok {
			t.Fatalf("%v refused", usd)
		}
		b := statefmt.Budget{CostMicroUSD: micro, CostMicroUSDUsed: micro / 3}
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back statefmt.Budget
		if err := json.Unmarshal(raw, &back); err != nil || back != b {
			t.Fatalf("%s reads back as %+v (%v), want %+v", raw, back, err, b)
		}
	}
	for _, bad := range []string{`{"costUsd": -1}`, `{"costUsdUsed": 1e15}`} {
		var b statefmt.Budget
		if err := json.Unmarshal([]byte(bad), &b); err == nil || !strings.Contains(err.Error(), "is not an amount of US dollars") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// The encoder copies an unchanged plan step's bytes from its previous encoding when every field
// compares equal; a field it does not compare would be written stale.
func TestStepMemoComparesEveryFieldOfAStep(t *testing.T) {
	if n := reflect.TypeOf(statefmt.ExecutionStep{}).NumField(); n != statefmt.ExecutionStepFields {
		t.Fatalf("ExecutionStep has %d fields, the encoder's memo compares %d: compare the new ones in stepSeen.same", n, statefmt.ExecutionStepFields)
	}
}

// outputsFromTools returns a state of n steps, each run by one tool call whose result is a
// distinct line of text; each step's output is its result without the newline, as a script
// step's is. The strings do not share bytes: what the encoder finds, it finds by content.
func outputsFromTools(t *testing.T, n int) (*statefmt.HarnessState, int) {
	t.Helper()
	js, err := os.ReadFile("testdata/state-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := statefmt.DecodeJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	rec, step := s.ToolCallHistory[0], s.Plan.Steps[1]
	s.ToolCallHistory, s.Plan.Steps = nil, nil
	text := 0
	for i := range n {
		out := fmt.Sprintf("%d: %s\n", i, strings.Repeat(fmt.Sprintf("line %d of the file é ", i), 20))
		rec.Result.Output = out
		s.ToolCallHistory = append(s.ToolCallHistory, rec)
		st := step
		st.ID, st.Dependencies = fmt.Sprintf("s%03d", i), nil
		o := strings.Clone(strings.TrimRight(out, "\n"))
		st.Output = &o
		s.Plan.Steps = append(s.Plan.Steps, st)
		text += len(out)
	}
	s.TotalToolCalls, s.CurrentStepIndex = n, 0
	return s, text
}

// A step's output that is the start of a tool call's result is stored once, as a reference to
// the record, by a full encoding and by an incremental one alike; it decodes to the same text.
func TestAStepOutputTakenFromItsToolIsStoredOnce(t *testing.T) {
	s, text := outputsFromTools(t, 40)
	full, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) > text*3/2 {
		t.Fatalf("full encoding: %d bytes for %d bytes of text: the outputs were stored twice", len(full), text)
	}
	got, err := statefmt.DecodeBinary(full)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("the full encoding does not decode to the state: %v", err)
	}
	again, err := statefmt.EncodeBinary(got)
	if err != nil || len(again) > text*3/2 {
		t.Fatalf("the decoded state re-encoded: %d bytes, %v", len(again), err)
	}

	// Step by step, as a run checkpoints: the record, then the step it completed.
	steps, hist := s.Plan.Steps, s.ToolCallHistory
	s.Plan.Steps, s.ToolCallHistory = slices.Clone(steps), nil
	for i := range s.Plan.Steps {
		s.Plan.Steps[i].Output, s.Plan.Steps[i].Status = nil, statefmt.StepPending
	}
	var enc statefmt.BinaryEncoder
	var last statefmt.Incremental
	for i := range steps {
		s.ToolCallHistory = hist[:i+1]
		if last, err = enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		s.Plan.Steps[i] = steps[i]
		if last, err = enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if i > 0 && last.Prefix == 0 {
			t.Fatalf("step %d: the encoder started over", i)
		}
	}
	if len(last.Bytes) > text*3/2 {
		t.Fatalf("incremental encoding: %d bytes for %d bytes of text: the outputs were stored twice", len(last.Bytes), text)
	}
	if got, err := statefmt.DecodeBinary(last.Bytes); err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("the incremental encoding does not decode to the state: %v", err)
	}
}

// A forged reference to a record is refused with what is wrong: a record that does not come
// before it, more bytes than the result has, a cut character, or a layout that has no
// references.
func TestDecodeBinaryRefusesForgedOutputReferences(t *testing.T) {
	s, _ := outputsFromTools(t, 1)
	out := "0123456789abcdeé and more"
	s.ToolCallHistory[0].Result.Output = out
	long := out[:17] // up to and with é, which is bytes 15 and 16
	s.Plan.Steps[0].Output = &long
	good, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	entry := []byte{2<<2 | 3, 0, 17} // kind 3: record 0, 17 bytes
	at := bytes.Index(good, entry)
	if at < 0 {
		t.Fatalf("no reference entry %x in the encoding", entry)
	}
	if got, err := statefmt.DecodeBinary(good); err != nil || *got.Plan.Steps[0].Output != long {
		t.Fatalf("the good encoding: %v", err)
	}
	forge := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"a record that does not come before it", forge(at+1, 5), "refers to tool-call record 5, but only 1 come before it"},
		{"more bytes than the result has", forge(at+2, 120), "takes 120 bytes of tool-call record 0's"},
		{"no bytes", forge(at+2, 0), "takes 0 bytes"},
		{"a cut character", forge(at+2, 16), "cuts a character"},
		{"an older layout", forge(3, 3), "log entry of unknown kind 3 (binary format version 3)"},
	} {
		_, err := statefmt.DecodeBinary(c.b)
		var de *statefmt.DecodeError
		if err == nil || !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a DecodeError saying %q", c.name, err, c.want)
		}
	}
}

// The encoder's buffer keeps room to grow in proportion to the state: a small state (a
// sub-agent's few checkpoints) keeps a small buffer, and a growing one moves to a new buffer
// a logarithmic number of times, not at every few steps.
func TestTheEncodersBufferGrowsWithTheState(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: "h.s1", AgentName: "a", TaskID: "t", Status: statefmt.StatusRunning}
	var enc statefmt.BinaryEncoder
	moves, last := 0, (*byte)(nil)
	for i := range 3000 {
		s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
		inc, err := enc.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if i < 5 && cap(inc.Bytes) > 32<<10 {
			t.Fatalf("after %d small checkpoints the encoder holds %d bytes for a %d-byte state", i+1, cap(inc.Bytes), len(inc.Bytes))
		}
		if p := &inc.Bytes[:1][0]; p != last {
			moves, last = moves+1, p
		}
		if i == 2999 {
			t.Logf("%d bytes encoded, %d of buffer, moved %d times", len(inc.Bytes), cap(inc.Bytes), moves)
			if cap(inc.Bytes) > 3*len(inc.Bytes)+128<<10 || moves > 16 {
				t.Fatalf("a %d-byte state in a %d-byte buffer, moved %d times", len(inc.Bytes), cap(inc.Bytes), moves)
			}
		}
	}
}

// A completed sub-agent's output is its step's: the state stores the text once, and a parent's
// checkpoint writes a few bytes per child after what is unchanged, not every child's output
// again (a parent of a thousand children rewrote megabytes at each of its checkpoints).
func TestSubAgentOutputsAreStoredOnceAndNotRewritten(t *testing.T) {
	const n = 300
	s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: "p", AgentName: "A", TaskID: "p", Status: statefmt.StatusRunning,
		Plan: &statefmt.ExecutionPlan{TaskID: "p"}, SubAgentResults: map[string]statefmt.SubAgentResult{}}
	for i := range n {
		s.Plan.Steps = append(s.Plan.Steps, statefmt.ExecutionStep{ID: fmt.Sprintf("s%03d", i), Description: "delegated",
			AssignedAgent: "B", Status: statefmt.StepPending, Dependencies: []string{}})
	}
	var enc statefmt.BinaryEncoder
	text := 0
	for i := range n {
		step := &s.Plan.Steps[i]
		id := "p." + step.ID
		s.SubAgentIDs = append(s.SubAgentIDs, id)
		s.SubAgentResults[id] = statefmt.SubAgentResult{HarnessID: id, AgentName: "B", StepID: step.ID, Status: statefmt.StatusRunning, Attempts: 1}
		step.Status, step.ChildHarnessID, step.Attempts = statefmt.StepRunning, id, 1
		if _, err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("%d: %s", i, strings.Repeat("what the child found é ", 50))
		res := s.SubAgentResults[id]
		res.Status, res.Output = statefmt.StatusCompleted, &out
		s.SubAgentResults[id] = res
		stepOut := strings.Clone(out) // the same text, not the same string
		step.Status, step.Output = statefmt.StepCompleted, &stepOut
		inc, err := enc.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if tail := len(inc.Bytes) - inc.Prefix; tail > 2048+80*(i+1) {
			t.Fatalf("child %d: %d bytes after the unchanged prefix: the children's outputs are written again", i, tail)
		}
		text += len(out)
		if i == n-1 {
			statefmt.Normalize(s) // as a decoded state is
			got, err := statefmt.DecodeBinary(inc.Bytes)
			if err != nil || !reflect.DeepEqual(got, s) {
				t.Fatalf("the incremental encoding does not decode to the state: %v", err)
			}
		}
	}
	full, err := statefmt.EncodeBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) > text+150*n {
		t.Fatalf("%d bytes for %d bytes of outputs: the outputs are stored twice", len(full), text)
	}
	if got, err := statefmt.DecodeBinary(full); err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("the full encoding does not decode to the state: %v", err)
	}
}
