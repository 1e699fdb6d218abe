package statefmt_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
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
		{"bad version", forge(func(b []byte) []byte { b[3] = 7; return b }), "binary format version 7 is not supported (supported: 1 to 2)"},
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
	if err != nil || first.Prefix != 0 || first.PrevTail != nil {
		t.Fatalf("first encoding: prefix %d, tail %d, %v", first.Prefix, len(first.PrevTail), err)
	}
	before := len(first.Bytes)
	s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
	s.CheckpointCount++
	inc, err := enc.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Prefix < before-len(inc.PrevTail) || len(inc.PrevTail) > 4096 || inc.Prefix < before*9/10 {
		t.Fatalf("prefix %d of %d bytes, previous tail %d bytes: the history was not kept in place", inc.Prefix, before, len(inc.PrevTail))
	}
}

// A state written in binary layout version 1 (before the budget's cost fields) still decodes,
// to the state its JSON says; re-encoded, it is written in the current layout.
func TestBinaryVersion1StillDecodes(t *testing.T) {
	v1, err := os.ReadFile("testdata/state-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile("testdata/state-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if v1[3] != 1 {
		t.Fatalf("the fixture is layout %d, want 1", v1[3])
	}
	got, err := statefmt.DecodeBinary(v1)
	if err != nil {
		t.Fatal(err)
	}
	want, err := statefmt.DecodeJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("layout 1 decodes to\n%+v\nwant\n%+v", got, want)
	}
	again, err := statefmt.EncodeBinary(got)
	if err != nil {
		t.Fatal(err)
	}
	if again[3] != statefmt.BinaryFormatVersion {
		t.Fatalf("re-encoded in layout %d", again[3])
	}
	if back, err := statefmt.DecodeBinary(again); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("the re-encoded state does not read back: %v", err)
	}
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
