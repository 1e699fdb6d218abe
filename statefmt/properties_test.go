package statefmt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

// genState draws a state from a seed: mostly small, some medium, a few large (thousands of
// records, huge strings, hundreds of map keys).
func genState() gopter.Gen {
	return gopter.CombineGens(gen.UInt64(), gen.IntRange(0, 99)).Map(func(v []any) *statefmt.HarnessState {
		r := rand.New(rand.NewPCG(v[0].(uint64), 7))
		size := stategen.Small
		switch p := v[1].(int); {
		case p == 99:
			size = stategen.Large
		case p >= 80:
			size = stategen.Medium
		}
		return stategen.State(r, size)
	})
}

// props runs minTests cases (≥1,000 for codecs). Under -short, which `make test-arm64` passes
// because qemu runs 10-20x slower, a quarter of them. The tests run in parallel.
func props(t *testing.T, minTests int) *gopter.Properties {
	t.Parallel()
	p := gopter.DefaultTestParametersWithSeed(20261121)
	p.MinSuccessfulTests = minTests
	if testing.Short() {
		p.MinSuccessfulTests = max(minTests/4, 100)
	}
	return gopter.NewProperties(p)
}

// TestPropertyRoundTrip: decode(encode(s)) == s for both codecs.
func TestPropertyRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		encode func(*statefmt.HarnessState) ([]byte, error)
		decode func([]byte) (*statefmt.HarnessState, error)
	}{
		{"json", statefmt.EncodeJSON, statefmt.DecodeJSON},
		{"binary", statefmt.EncodeBinary, statefmt.DecodeBinary},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := props(t, 1000)
			ps.Property("decode(encode(s)) == s", prop.ForAll(func(s *statefmt.HarnessState) bool {
				b, err := c.encode(s)
				if err != nil {
					t.Log(err)
					return false
				}
				got, err := c.decode(b)
				if err != nil {
					t.Log(err)
					return false
				}
				return reflect.DeepEqual(got, s)
			}, genState()))
			ps.TestingRun(t)
		})
	}
}

func TestPropertyJSONBinaryEquivalence(t *testing.T) {
	ps := props(t, 1000)
	ps.Property("JSON and binary carry the same state", prop.ForAll(func(s *statefmt.HarnessState) bool {
		bin, _ := statefmt.EncodeBinary(s)
		js, _ := statefmt.EncodeJSON(s)
		fromJSON, err := statefmt.DecodeJSON(js)
		if err != nil {
			return false
		}
		bin2, _ := statefmt.EncodeBinary(fromJSON)
		fromBin, err := statefmt.DecodeBinary(bin)
		if err != nil {
			return false
		}
		js2, _ := statefmt.EncodeJSON(fromBin)
		return bytes.Equal(bin, bin2) && bytes.Equal(js, js2)
	}, genState()))
	ps.TestingRun(t)
}

func TestPropertyDeterminism(t *testing.T) {
	ps := props(t, 1000)
	ps.Property("equal states encode to equal bytes", prop.ForAll(func(s *statefmt.HarnessState) bool {
		// A copy built independently (fresh maps, so a different iteration order).
		js, _ := statefmt.EncodeJSON(s)
		c, err := statefmt.DecodeJSON(js)
		if err != nil {
			return false
		}
		b1, _ := statefmt.EncodeBinary(s)
		b2, _ := statefmt.EncodeBinary(c)
		j2, _ := statefmt.EncodeJSON(c)
		return bytes.Equal(b1, b2) && bytes.Equal(js, j2)
	}, genState()))
	ps.TestingRun(t)
}

// mutateResults changes the sub-agent results the way a parent does: a child spawned, one that
// completed with its step's output or a text of its own, one that ended with an empty output
// or none, one gone (a rollback to before it).
func mutateResults(r *rand.Rand, s *statefmt.HarnessState) {
	if s.SubAgentResults == nil {
		s.SubAgentResults = map[string]statefmt.SubAgentResult{}
	}
	keys := slices.Sorted(maps.Keys(s.SubAgentResults))
	switch k := r.IntN(4); {
	case k == 0 || len(keys) == 0:
		id := fmt.Sprintf("child-%d", r.IntN(1000))
		s.SubAgentResults[id] = statefmt.SubAgentResult{HarnessID: id, AgentName: "PLUTO", StepID: "s", Status: statefmt.StatusRunning, Attempts: 1}
	case k == 1:
		key := keys[r.IntN(len(keys))]
		res := s.SubAgentResults[key]
		out := stategen.String(r, stategen.Small)
		if s.Plan != nil && len(s.Plan.Steps) > 0 && r.IntN(3) > 0 {
			if st := s.Plan.Steps[r.IntN(len(s.Plan.Steps))]; st.Output != nil {
				out = *st.Output
			}
		}
		res.Status, res.Output = statefmt.StatusCompleted, &out
		s.SubAgentResults[key] = res
	case k == 2:
		key := keys[r.IntN(len(keys))]
		res := s.SubAgentResults[key]
		res.Output = nil
		if r.IntN(2) == 0 {
			res.Output = new(string)
		}
		s.SubAgentResults[key] = res
	default:
		delete(s.SubAgentResults, keys[r.IntN(len(keys))])
	}
}

// mutatePlan changes the plan the way a run, a retry or a replan does: a step's fields set,
// cleared or edited in place, steps inserted or removed, or a new plan. It returns the index of
// the step it changed in place, or -1 when it changed the plan's shape.
func mutatePlan(r *rand.Rand, s *statefmt.HarnessState) int {
	if s.Plan == nil || len(s.Plan.Steps) == 0 || r.IntN(8) == 0 {
		s.Plan = stategen.Plan(r, stategen.Small)
		return -1
	}
	steps := s.Plan.Steps
	at := r.IntN(len(steps))
	st := &steps[at]
	text := stategen.String(r, stategen.Small)
	switch r.IntN(11) {
	case 0:
		st.Output = &text
	case 1:
		if st.Output != nil {
			*st.Output += "!" // in place, through the same pointer
		} else {
			st.Error = &text
		}
	case 2:
		st.Output, st.Error = nil, nil
	case 3:
		st.Status = statefmt.StepStatuses[r.IntN(len(statefmt.StepStatuses))]
	case 4:
		st.Attempts++
	case 5:
		if len(st.Dependencies) > 0 {
			st.Dependencies[0] += "x" // in place, in the same slice
		} else {
			st.Dependencies = append(st.Dependencies, steps[0].ID)
		}
	case 6:
		st.Description, st.Phase, st.ChildHarnessID = text, text, text
	case 7:
		st.Critical, st.AssignedAgent = !st.Critical, text
	case 8:
		st.ID = text
	case 9:
		i := r.IntN(len(steps))
		s.Plan.Steps = slices.Insert(steps, i, statefmt.ExecutionStep{ID: text, AssignedAgent: "a", Status: statefmt.StepPending, Dependencies: []string{}})
		return -1
	default:
		i := r.IntN(len(steps))
		s.Plan.Steps = slices.Delete(steps, i, i+1)
		return -1
	}
	return at
}

// TestPropertyIncrementalDecodesLikeFull drives one BinaryEncoder through a random history of
// a harness (records appended, the rest mutated, step outputs set, changed and cleared,
// sometimes a shrink or an in-place edit that must force a restart) and checks that every
// encoding decodes to the same state as a fresh full one, that an encoder starting over writes
// exactly the full encoding, and the Prefix and Inserted contract against the previous
// encoding.
func TestPropertyIncrementalDecodesLikeFull(t *testing.T) {
	ps := props(t, 1000)
	ps.Property("incremental encoding decodes like the full encoding", prop.ForAll(func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		s := stategen.State(r, stategen.Small)
		var enc statefmt.BinaryEncoder
		var prev []byte
		for step := range 12 {
			switch k := r.IntN(12); {
			case k < 6:
				for range 1 + r.IntN(3) {
					s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
				}
				s.TotalToolCalls = len(s.ToolCallHistory)
			case k == 6 && len(s.ToolCallHistory) > 0:
				s.ToolCallHistory = s.ToolCallHistory[:r.IntN(len(s.ToolCallHistory))]
			case k == 7 && len(s.ToolCallHistory) > 0:
				s.ToolCallHistory[len(s.ToolCallHistory)-1].Result.Output += "!"
			case k == 8 || k == 9:
				mutatePlan(r, s)
			case k >= 10:
				mutateResults(r, s)
			}
			s.CheckpointCount++
			s.UpdatedAt = stategen.Time(r)
			s.StatusReason = stategen.String(r, stategen.Small)
			statefmt.Normalize(s)
			inc, err := enc.Encode(s)
			if err != nil {
				t.Log(err)
				return false
			}
			full, _ := statefmt.EncodeBinary(s)
			got, err := statefmt.DecodeBinaryUnvalidated(inc.Bytes)
			if err != nil {
				t.Logf("step %d: the incremental encoding does not decode: %v", step, err)
				return false
			}
			want, _ := statefmt.DecodeBinaryUnvalidated(full)
			if !reflect.DeepEqual(got, want) {
				t.Logf("step %d: incremental decodes to another state than full", step)
				return false
			}
			if inc.Prefix > 0 {
				if prev == nil || inc.Prefix > len(prev) || !bytes.Equal(inc.Bytes[:inc.Prefix], prev[:inc.Prefix]) {
					t.Logf("step %d: Prefix does not describe the previous encoding", step)
					return false
				}
				// The new bytes are the log's new entries: the rest starts where the trailer
				// says the log ends.
				logEnd := binary.LittleEndian.Uint64(inc.Bytes[len(inc.Bytes)-16:])
				if inc.Inserted < 0 || uint64(inc.Prefix+inc.Inserted) != logEnd {
					t.Logf("step %d: %d bytes inserted after a prefix of %d, the log ends at %d", step, inc.Inserted, inc.Prefix, logEnd)
					return false
				}
			} else if inc.Inserted != 0 || !bytes.Equal(inc.Bytes, full) {
				t.Logf("step %d: an encoder starting over did not write the full encoding", step)
				return false
			}
			prev = bytes.Clone(inc.Bytes)
		}
		return true
	}, gen.UInt64()))
	ps.TestingRun(t)
}

func genRecord() gopter.Gen {
	return gopter.CombineGens(gen.UInt64(), gen.UInt64Range(1, 1<<40), gen.IntRange(0, 5000), gen.Bool()).Map(func(v []any) *statefmt.Record {
		r := rand.New(rand.NewPCG(v[0].(uint64), 5))
		seq := v[1].(uint64)
		payload := make([]byte, v[2].(int))
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
		rec := &statefmt.Record{Kind: statefmt.KindKeyframe, Seq: seq, BaseSeq: seq, StateHash: r.Uint64(), ChainHash: r.Uint64(),
			Compression: statefmt.CompressionNone, RawLen: uint64(len(payload)), StateFormat: statefmt.BinaryFormatVersion, Payload: payload}
		if v[3].(bool) && seq > 1 {
			rec.Kind, rec.BaseSeq, rec.Prefix, rec.DeltaFormat = statefmt.KindDelta, seq-1, r.Uint64N(1<<30), 1
			rec.Compression, rec.RawLen = statefmt.CompressionZstd, r.Uint64N(statefmt.MaxRawLen)
		}
		return rec
	})
}

func TestPropertyEnvelopeRoundTrip(t *testing.T) {
	ps := props(t, 1000)
	ps.Property("DecodeRecord(EncodeRecord(r)) == r", prop.ForAll(func(rec *statefmt.Record) bool {
		got, err := statefmt.DecodeRecord(statefmt.EncodeRecord(nil, rec))
		if err != nil {
			t.Log(err)
			return false
		}
		if len(rec.Payload) == 0 {
			got.Payload, rec.Payload = nil, nil
		}
		return reflect.DeepEqual(got, rec)
	}, genRecord()))
	ps.TestingRun(t)
}

func TestPropertyEnvelopeCorruptionDetected(t *testing.T) {
	ps := props(t, 1000)
	ps.Property("any flipped bit is detected", prop.ForAll(func(rec *statefmt.Record, pos uint64, bit uint8) bool {
		b := statefmt.EncodeRecord(nil, rec)
		b[pos%uint64(len(b))] ^= 1 << (bit % 8)
		_, err := statefmt.DecodeRecord(b)
		return err != nil
	}, genRecord(), gen.UInt64(), gen.UInt8()))
	ps.TestingRun(t)
}

// TestPropertyToldWhichStepsChangedDecodesLikeFull drives EncodeChanged as a harness does:
// told the steps it changed in place since the previous encoding (none, one or several, with
// repeats), and told nothing when the plan changed shape. Every encoding decodes to the state
// it encoded; under the invariants tag, the encoder also checks every step it was not told of.
func TestPropertyToldWhichStepsChangedDecodesLikeFull(t *testing.T) {
	ps := props(t, 300)
	ps.Property("an encoder told which steps changed decodes like a full encoding", prop.ForAll(func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 5))
		s := stategen.State(r, stategen.Small)
		statefmt.Normalize(s)
		var enc statefmt.BinaryEncoder
		for step := range 40 {
			changes := statefmt.StepChanges{Known: step > 0}
			for range r.IntN(4) {
				switch i := mutatePlan(r, s); {
				case i < 0:
					changes.Known = false
				default:
					changes.Indexes = append(changes.Indexes, i, i)
				}
			}
			if r.IntN(3) == 0 {
				s.ToolCallHistory = append(s.ToolCallHistory, stategen.Record(r, stategen.Small))
				s.TotalToolCalls = len(s.ToolCallHistory)
			}
			s.CheckpointCount++
			statefmt.Normalize(s)
			inc, err := enc.EncodeChanged(s, changes)
			if err != nil {
				t.Log(err)
				return false
			}
			got, err := statefmt.DecodeBinaryUnvalidated(inc.Bytes)
			if err != nil {
				t.Logf("step %d: does not decode: %v", step, err)
				return false
			}
			full, _ := statefmt.EncodeBinary(s)
			want, _ := statefmt.DecodeBinaryUnvalidated(full)
			if !reflect.DeepEqual(got, want) {
				t.Logf("step %d: decodes to another state than the full encoding (told %+v)", step, changes)
				return false
			}
		}
		return true
	}, gen.UInt64()))
	ps.TestingRun(t)
}

// A plan of 200 steps changed one step at a time, as a harness does, told which: the steps'
// entry numbers pass 127 and 16,383, so that a step's number takes a byte more than it did,
// and every encoding still decodes to the state encoded.
func TestToldStepChangesDecodeAsEntryNumbersGrow(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	s := &statefmt.HarnessState{SchemaVersion: 1, HarnessID: "h", TaskID: "t", AgentName: "a", Status: statefmt.StatusRunning,
		Plan: &statefmt.ExecutionPlan{TaskID: "t"}}
	for i := range 200 {
		s.Plan.Steps = append(s.Plan.Steps, statefmt.ExecutionStep{ID: fmt.Sprintf("s%d", i), Description: "d", AssignedAgent: "a",
			Dependencies: []string{}, Status: statefmt.StepPending})
	}
	var enc statefmt.BinaryEncoder
	for n := range 17_000 {
		i := r.IntN(len(s.Plan.Steps))
		if n < 150 {
			i = n // the first steps, whose numbers took one byte, first
		}
		s.Plan.Steps[i].Attempts++
		inc, err := enc.EncodeChanged(s, statefmt.StepChanges{Known: n > 0, Indexes: []int{i}})
		if err != nil {
			t.Fatal(err)
		}
		if n%97 != 0 && n < 16_900 {
			continue
		}
		got, err := statefmt.DecodeBinaryUnvalidated(inc.Bytes)
		if err != nil {
			t.Fatalf("change %d: does not decode: %v", n, err)
		}
		full, _ := statefmt.EncodeBinary(s)
		want, _ := statefmt.DecodeBinaryUnvalidated(full)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("change %d (step %d): decodes to another state than the full encoding", n, i)
		}
	}
}

// chunks records every Write it is given; after fail writes it refuses the rest.
type chunks struct {
	all    bytes.Buffer
	writes int
	fail   int
}

func (c *chunks) Write(p []byte) (int, error) {
	c.writes++
	if c.fail > 0 && c.writes > c.fail {
		return 0, errors.New("disk full")
	}
	return c.all.Write(p)
}

// WriteJSON writes what EncodeJSON returns, byte for byte, in pieces; a write that fails stops
// it and is what it returns.
func TestPropertyWriteJSONWritesEncodeJSONsBytes(t *testing.T) {
	ps := props(t, 300)
	ps.Property("WriteJSON writes EncodeJSON's bytes", prop.ForAll(func(s *statefmt.HarnessState) bool {
		want, err := statefmt.EncodeJSON(s)
		var c chunks
		err2 := statefmt.WriteJSON(&c, s)
		return err == nil && err2 == nil && bytes.Equal(c.all.Bytes(), want)
	}, genState()))
	ps.TestingRun(t)

	r := rand.New(rand.NewPCG(11, 11))
	big := stategen.Reference(r, 3<<20)
	want, err := statefmt.EncodeJSON(big)
	if err != nil {
		t.Fatal(err)
	}
	var c chunks
	if err := statefmt.WriteJSON(&c, big); err != nil || !bytes.Equal(c.all.Bytes(), want) {
		t.Fatalf("a %d-byte document: %v, equal %v", len(want), err, bytes.Equal(c.all.Bytes(), want))
	}
	if c.writes < len(want)/(80<<10) {
		t.Fatalf("a %d-byte document in %d writes: it was held whole", len(want), c.writes)
	}
	failing := chunks{fail: 2}
	if err := statefmt.WriteJSON(&failing, big); err == nil || err.Error() != "disk full" || failing.writes != 3 {
		t.Fatalf("a writer that fails at its third write: %v after %d writes", err, failing.writes)
	}
}
