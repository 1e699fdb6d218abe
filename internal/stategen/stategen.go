// Package stategen generates HarnessStates for property tests, fuzz seeds and benchmarks:
// unicode and JSON-hostile strings, empty and huge values, deep plans, long tool-call histories
// and maps with many keys. Everything is deterministic for a given *rand.Rand, and every state it
// returns is valid and normalised (see statefmt.Normalize).
package stategen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/harness-edge/harness-edge/internal/workload"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Size bounds how big a generated state gets.
type Size struct {
	Records   int // tool-call records, at most
	Steps     int // plan steps, at most
	MapKeys   int // sub-agent results, at most
	Messages  int // conversation messages, at most
	StringLen int // typical string length, at most
	HugeEvery int // one string in HugeEvery is huge (100 KB); 0: never
}

// Small, Medium and Large are the sizes property tests draw from.
var (
	Small  = Size{Records: 5, Steps: 4, MapKeys: 3, Messages: 4, StringLen: 24}
	Medium = Size{Records: 60, Steps: 30, MapKeys: 40, Messages: 20, StringLen: 200, HugeEvery: 400}
	Large  = Size{Records: 3000, Steps: 200, MapKeys: 300, Messages: 100, StringLen: 400, HugeEvery: 2000}
)

var pieces = []string{
	"a", "Z", "0", " ", "\n", "\t", `"`, `\`, "/", "<", ">", "&", "\u0000", "\u001f", "\u007f",
	"é", "ß", "中文", "日本", "🚀", "👩‍💻", "\u2028", "\u2029", "\ufeff", "\U0010FFFF", "ok", "error:",
}

// String returns a string of up to n runes mixing ASCII, multi-byte, control and JSON-special
// characters; sometimes empty, sometimes (per size) huge.
func String(r *rand.Rand, sz Size) string {
	if r.IntN(8) == 0 {
		return ""
	}
	if sz.HugeEvery > 0 && r.IntN(sz.HugeEvery) == 0 {
		return string(workload.Text(r, 100_000))
	}
	var b strings.Builder
	for range 1 + r.IntN(max(sz.StringLen, 1)) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func ident(r *rand.Rand, prefix string) string {
	return fmt.Sprintf("%s-%x", prefix, r.Uint32())
}

// Time returns a UTC instant between 1970 and 2100 with nanoseconds, or sometimes the zero time.
func Time(r *rand.Rand) time.Time {
	if r.IntN(20) == 0 {
		return time.Time{}.UTC()
	}
	return time.Unix(r.Int64N(4102444800), r.Int64N(1e9)).UTC()
}

func optTime(r *rand.Rand) *time.Time {
	if r.IntN(2) == 0 {
		return nil
	}
	t := Time(r)
	return &t
}

func optString(r *rand.Rand, sz Size) *string {
	if r.IntN(2) == 0 {
		return nil
	}
	s := String(r, sz)
	return &s
}

// JSON returns a canonical JSON value (object, array or scalar, nested), or nil.
func JSON(r *rand.Rand, sz Size, depth int) statefmt.JSONValue {
	if r.IntN(6) == 0 {
		return nil
	}
	v, err := statefmt.JSONOf(jsonAny(r, sz, depth))
	if err != nil {
		panic(err)
	}
	return v
}

func jsonAny(r *rand.Rand, sz Size, depth int) any {
	k := r.IntN(6)
	if depth <= 0 {
		k = r.IntN(3)
	}
	switch k {
	case 0:
		return String(r, Small)
	case 1:
		return r.Int64N(1<<53) - 1<<52
	case 2:
		return r.IntN(2) == 0
	case 3:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = jsonAny(r, sz, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for range r.IntN(5) {
			m[String(r, Small)] = jsonAny(r, sz, depth-1)
		}
		return m
	}
}

// Record returns one tool-call record.
func Record(r *rand.Rand, sz Size) statefmt.ToolCallRecord {
	res := statefmt.ToolResult{Success: r.IntN(3) != 0, Output: String(r, sz), Truncated: r.IntN(10) == 0}
	if r.IntN(3) == 0 {
		res.Data = JSON(r, sz, 2)
	}
	if !res.Success {
		res.Error = String(r, Small)
		res.ErrorKind = []statefmt.ErrorKind{"transient", "permanent", "timeout", "permission", "budget"}[r.IntN(5)]
	}
	return statefmt.ToolCallRecord{
		CallName:   []string{"read_file", "write_file", "edit_file", "glob", "grep", "bash", "deploy"}[r.IntN(7)],
		Arguments:  JSON(r, sz, 2),
		Result:     res,
		Duration:   time.Duration(1 + r.Int64N(int64(10*time.Minute))),
		RetryCount: r.IntN(4),
		Timestamp:  Time(r),
	}
}

// Plan returns a plan of up to n steps whose dependencies point only at earlier steps (a DAG),
// sometimes as one long chain (a deep plan).
func Plan(r *rand.Rand, sz Size) *statefmt.ExecutionPlan {
	if r.IntN(5) == 0 {
		return nil
	}
	n := r.IntN(sz.Steps + 1)
	chain := r.IntN(4) == 0
	p := &statefmt.ExecutionPlan{TaskID: ident(r, "task"), CreatedAt: Time(r)}
	for i := range n {
		st := statefmt.ExecutionStep{
			ID:            fmt.Sprintf("step-%d", i),
			Description:   String(r, sz),
			AssignedAgent: []string{"MARS", "PLUTO", "VENUS"}[r.IntN(3)],
			Critical:      r.IntN(3) == 0,
			Status:        statefmt.StepStatuses[r.IntN(len(statefmt.StepStatuses))],
			Output:        optString(r, sz),
			Error:         optString(r, Small),
			Attempts:      r.IntN(3),
		}
		if r.IntN(4) == 0 {
			st.Phase = fmt.Sprintf("phase-%d", r.IntN(3))
		}
		if r.IntN(5) == 0 {
			st.ChildHarnessID = ident(r, "harness")
		}
		switch {
		case chain && i > 0:
			st.Dependencies = []string{fmt.Sprintf("step-%d", i-1)}
		case i > 0:
			for range r.IntN(min(i, 4) + 1) {
				d := fmt.Sprintf("step-%d", r.IntN(i))
				dup := false
				for _, x := range st.Dependencies {
					dup = dup || x == d
				}
				if !dup {
					st.Dependencies = append(st.Dependencies, d)
				}
			}
		}
		p.Steps = append(p.Steps, st)
	}
	return p
}

// State returns a valid, normalised state of at most the given size.
func State(r *rand.Rand, sz Size) *statefmt.HarnessState {
	s := &statefmt.HarnessState{
		SchemaVersion:    statefmt.SchemaVersion,
		HarnessID:        ident(r, "harness"),
		AgentName:        []string{"MARS", "PLUTO", "VENUS", "代理"}[r.IntN(4)],
		TaskID:           String(r, Small),
		Status:           statefmt.Statuses[r.IntN(len(statefmt.Statuses))],
		CreatedAt:        Time(r),
		UpdatedAt:        Time(r),
		Plan:             Plan(r, sz),
		CurrentStepIndex: r.IntN(10),
		LastCheckpointAt: optTime(r),
		CheckpointCount:  r.IntN(100000),
	}
	// The current step is a step of the plan (0 without one).
	if s.Plan == nil || len(s.Plan.Steps) == 0 {
		s.CurrentStepIndex = 0
	} else {
		s.CurrentStepIndex %= len(s.Plan.Steps)
	}
	for range r.IntN(sz.Records + 1) {
		s.ToolCallHistory = append(s.ToolCallHistory, Record(r, sz))
	}
	s.TotalToolCalls = len(s.ToolCallHistory)
	// A step's output is often its tool's result, or the start of it.
	if s.Plan != nil && len(s.ToolCallHistory) > 0 {
		for i := range s.Plan.Steps {
			if st := &s.Plan.Steps[i]; st.Output != nil && r.IntN(3) == 0 {
				out := s.ToolCallHistory[r.IntN(len(s.ToolCallHistory))].Result.Output
				cut := len(out) - r.IntN(len(out)/2+1)
				for cut > 0 && cut < len(out) && !utf8.RuneStart(out[cut]) {
					cut--
				}
				out = out[:cut]
				st.Output = &out
			}
		}
	}
	for range r.IntN(4) {
		s.SubAgentIDs = append(s.SubAgentIDs, ident(r, "harness"))
	}
	if nk := r.IntN(sz.MapKeys + 1); nk > 0 {
		s.SubAgentResults = map[string]statefmt.SubAgentResult{}
		for range nk {
			id := ident(r, "harness")
			s.SubAgentResults[id] = statefmt.SubAgentResult{
				HarnessID: id, AgentName: "PLUTO", StepID: ident(r, "step"),
				Status: statefmt.Statuses[r.IntN(len(statefmt.Statuses))], Output: optString(r, sz),
				Error: optString(r, Small), Attempts: r.IntN(3), CompletedAt: optTime(r),
			}
		}
	}
	if r.IntN(2) == 0 {
		a := &statefmt.AgentLoopSnapshot{Iteration: r.IntN(50), Scratchpad: String(r, sz), Handoff: JSON(r, sz, 3), Data: JSON(r, sz, 1)}
		for range r.IntN(sz.Messages + 1) {
			m := statefmt.Message{Role: []string{"system", "user", "assistant", "tool"}[r.IntN(4)], Content: String(r, sz)}
			if m.Role == "tool" {
				m.ToolCallID = ident(r, "call")
			}
			if m.Role == "assistant" && r.IntN(2) == 0 {
				m.ToolCalls = []statefmt.MessageToolCall{{ID: ident(r, "call"), Name: "grep", Arguments: `{"pattern":"TODO"}`}}
			}
			a.Messages = append(a.Messages, m)
		}
		s.AgentLoopSnapshot = a
	}
	if r.IntN(3) == 0 {
		s.ParentHarnessID, s.Depth = ident(r, "harness"), 1+r.IntN(3)
	}
	s.AutonomyLevel = r.IntN(6)
	if s.Status == statefmt.StatusPaused || s.Status == statefmt.StatusFailed {
		s.StatusReason = String(r, Small)
	}
	if r.IntN(3) == 0 {
		s.Phase = fmt.Sprintf("phase-%d", r.IntN(4))
	}
	s.Iterations = r.IntN(100)
	if r.IntN(2) == 0 {
		s.Budget = &statefmt.Budget{ToolCalls: r.IntN(200), Tokens: r.Int64N(1e7), WallClock: time.Duration(r.Int64N(int64(12 * time.Hour))),
			TokensUsed: r.Int64N(1e6), WallClockUsed: time.Duration(r.Int64N(int64(time.Hour))),
			CostMicroUSD: r.Int64N(1e8), CostMicroUSDUsed: r.Int64N(1e7)}
	}
	for range r.IntN(4) {
		s.Gates = append(s.Gates, statefmt.Gate{ID: ident(r, "gate"), StepID: ident(r, "step"),
			Status: statefmt.GateStatuses[r.IntN(3)], Kind: "step", Reason: String(r, Small), CreatedAt: Time(r), ResolvedAt: optTime(r)})
	}
	for i := range r.IntN(3) {
		args, _ := statefmt.JSONOf(map[string]any{"target": ident(r, "env")})
		e := statefmt.SideEffect{StepID: ident(r, "step"), Tool: ident(r, "tool"), Arguments: args, Occurrence: 1 + i, StartedAt: Time(r)}
		if r.IntN(2) == 0 {
			e.Result = &statefmt.ToolResult{Success: r.IntN(2) == 0, Output: String(r, Small), ErrorKind: []statefmt.ErrorKind{"", "transient"}[r.IntN(2)]}
		}
		if r.IntN(3) == 0 {
			e.GateID = ident(r, "gate")
		}
		s.SideEffects = append(s.SideEffects, e)
	}
	statefmt.Normalize(s)
	return s
}

// ReferenceRecord is one step of the reference workload: a tool call whose result is 300-2000
// bytes of realistic text (file contents, command output).
func ReferenceRecord(r *rand.Rand, at time.Time) statefmt.ToolCallRecord {
	args, _ := statefmt.JSONOf(map[string]any{"path": fmt.Sprintf("src/module_%d.go", r.IntN(500)), "limit": 200})
	return statefmt.ToolCallRecord{
		CallName:  []string{"read_file", "grep", "bash"}[r.IntN(3)],
		Arguments: args,
		Result:    statefmt.ToolResult{Success: true, Output: string(workload.Text(r, 300+r.IntN(1701)))},
		Duration:  time.Duration(1+r.IntN(5000)) * time.Millisecond,
		Timestamp: at,
	}
}

// Reference returns a running state with a small plan and an agent snapshot, whose history of
// reference records makes its binary encoding about targetBytes long.
func Reference(r *rand.Rand, targetBytes int) *statefmt.HarnessState {
	t0 := time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)
	s := &statefmt.HarnessState{
		SchemaVersion: statefmt.SchemaVersion, HarnessID: "harness-ref", AgentName: "MARS", TaskID: "nightly-refactor",
		Status: statefmt.StatusRunning, CreatedAt: t0, UpdatedAt: t0, AutonomyLevel: 3,
		Plan: &statefmt.ExecutionPlan{TaskID: "nightly-refactor", CreatedAt: t0, Steps: []statefmt.ExecutionStep{
			{ID: "s1", Description: "Read the notes", AssignedAgent: "MARS", Status: statefmt.StepCompleted},
			{ID: "s2", Description: "Refactor the parser", AssignedAgent: "MARS", Dependencies: []string{"s1"}, Critical: true, Status: statefmt.StepRunning},
			{ID: "s3", Description: "Run the tests", AssignedAgent: "MARS", Dependencies: []string{"s2"}, Status: statefmt.StepPending},
		}},
		AgentLoopSnapshot: &statefmt.AgentLoopSnapshot{Iteration: 1, Scratchpad: string(workload.Text(r, 2000))},
	}
	size := 2500
	for size < targetBytes {
		rec := ReferenceRecord(r, t0.Add(time.Duration(len(s.ToolCallHistory))*time.Second))
		size += len(rec.Result.Output) + 80
		s.ToolCallHistory = append(s.ToolCallHistory, rec)
	}
	s.TotalToolCalls = len(s.ToolCallHistory)
	return s
}
