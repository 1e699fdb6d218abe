package statefmt

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/harness-edge/harness-edge/internal/ident"
	"github.com/harness-edge/harness-edge/internal/idlist"
)

// SchemaVersion is the HarnessState schema this build writes. Older versions are read through
// the migration registry; newer ones are refused.
const SchemaVersion = 1

// Status is a harness's lifecycle status.
type Status string

const (
	StatusCreated   Status = "created"
	StatusRunning   Status = "running"
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// Statuses lists every harness status in the order the binary format numbers them (from 1).
var Statuses = []Status{StatusCreated, StatusRunning, StatusPaused, StatusCompleted, StatusFailed}

// StepStatus is a plan step's status.
type StepStatus string

const (
	StepPending   StepStatus = "pending"
	StepReady     StepStatus = "ready"
	StepRunning   StepStatus = "running"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
	StepBlocked   StepStatus = "blocked"
)

// StepStatuses lists every step status in binary-format order (from 1).
var StepStatuses = []StepStatus{StepPending, StepReady, StepRunning, StepCompleted, StepFailed, StepBlocked}

// GateStatus is a human gate's status.
type GateStatus string

const (
	GatePending  GateStatus = "pending"
	GateApproved GateStatus = "approved"
	GateRejected GateStatus = "rejected"
)

// GateStatuses lists every gate status in binary-format order (from 1).
var GateStatuses = []GateStatus{GatePending, GateApproved, GateRejected}

// HarnessState is the whole persisted state of one harness: the core fields, in their
// order, then harness-edge's additions (optional in JSON: absent means zero).
type HarnessState struct {
	SchemaVersion     int                       `json:"schemaVersion"`
	HarnessID         string                    `json:"harnessId"`
	AgentName         string                    `json:"agentName"`
	TaskID            string                    `json:"taskId"`
	Status            Status                    `json:"status"`
	CreatedAt         time.Time                 `json:"createdAt"`
	UpdatedAt         time.Time                 `json:"updatedAt"`
	Plan              *ExecutionPlan            `json:"plan"`
	CurrentStepIndex  int                       `json:"currentStepIndex"`
	ToolCallHistory   []ToolCallRecord          `json:"toolCallHistory"`
	TotalToolCalls    int                       `json:"totalToolCalls"`
	SubAgentIDs       []string                  `json:"subAgentIds"`
	SubAgentResults   map[string]SubAgentResult `json:"subAgentResults"`
	AgentLoopSnapshot *AgentLoopSnapshot        `json:"agentLoopSnapshot"`
	LastCheckpointAt  *time.Time                `json:"lastCheckpointAt"`
	CheckpointCount   int                       `json:"checkpointCount"`

	// ParentHarnessID is the parent of a sub-agent harness ("" for a top-level one).
	ParentHarnessID string `json:"parentHarnessId,omitempty"`
	// Depth is the sub-agent depth (0 for a top-level harness).
	Depth int `json:"depth,omitempty"`
	// AutonomyLevel is 1..5 (0: not set).
	AutonomyLevel int `json:"autonomyLevel,omitempty"`
	// StatusReason says why the harness is paused or failed.
	StatusReason string `json:"statusReason,omitempty"`
	// Phase is the overnight-evolution phase the harness is in.
	Phase string `json:"phase,omitempty"`
	// Iterations counts agent iterations across all steps.
	Iterations int `json:"iterations,omitempty"`
	// Budget holds the limits and what has been used of them.
	Budget *Budget `json:"budget,omitempty"`
	// Gates holds pending gates and the history of resolved ones, oldest first.
	Gates []Gate `json:"gates,omitempty"`
	// SideEffects journals the side-effecting tool calls of the step in flight: an entry is
	// written (with the state) before such a call runs, and its Result after. A step's entries
	// are dropped when the step ends; by then its calls are in the history.
	SideEffects []SideEffect `json:"sideEffects,omitempty"`
}

// ExecutionPlan is the decomposition of a task into steps.
type ExecutionPlan struct {
	TaskID    string          `json:"taskId"`
	Steps     []ExecutionStep `json:"steps"`
	CreatedAt time.Time       `json:"createdAt"`
}

// ExecutionStep is one step of a plan. Output and Error are nil until set: an empty output is
// not the same as none.
type ExecutionStep struct {
	ID            string     `json:"id"`
	Description   string     `json:"description"`
	AssignedAgent string     `json:"assignedAgent"`
	Dependencies  []string   `json:"dependencies"`
	Critical      bool       `json:"critical"`
	Status        StepStatus `json:"status"`
	Output        *string    `json:"output,omitempty"`
	Error         *string    `json:"error,omitempty"`

	// Phase groups steps for overnight evolution.
	Phase string `json:"phase,omitempty"`
	// Attempts counts how often the step was started.
	Attempts int `json:"attempts,omitempty"`
	// ChildHarnessID is the sub-agent harness running this step, if any.
	ChildHarnessID string `json:"childHarnessId,omitempty"`
}

// ToolCallRecord is one completed tool call. Records are immutable once appended to the history.
// The runtime records a call's Timestamp and Duration at Precision (see Instant, Span).
type ToolCallRecord struct {
	CallName   string        `json:"callName"`
	Arguments  JSONValue     `json:"arguments"`
	Result     ToolResult    `json:"result"`
	Duration   time.Duration `json:"-"` // JSON: "duration", milliseconds (fractional), see json.go
	RetryCount int           `json:"retryCount"`
	Timestamp  time.Time     `json:"timestamp"`
}

// ToolResult is what a tool call returned.
type ToolResult struct {
	Success bool `json:"success"`
	// Output is the tool's text output (capped; Truncated says so).
	Output string `json:"output,omitempty"`
	// Data is structured output, for tools that return JSON.
	Data JSONValue `json:"data,omitempty"`
	// Error is the failure message.
	Error string `json:"error,omitempty"`
	// ErrorKind classifies a failure.
	ErrorKind ErrorKind `json:"errorKind,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
}

// ErrorKind classifies a failed tool call. The strings are stored in every format: they never
// change, and a retired one stays reserved. A stored kind this build does not know is kept as
// it is (a newer build may have written it).
type ErrorKind string

const (
	// ErrorTransient is worth retrying: the pipeline retries it with backoff.
	ErrorTransient ErrorKind = "transient"
	// ErrorPermanent is not worth retrying.
	ErrorPermanent ErrorKind = "permanent"
	// ErrorTimeout is a call cut off by its timeout.
	ErrorTimeout ErrorKind = "timeout"
	// ErrorPermission is a call outside the agent's permitted tools, refused unexecuted.
	ErrorPermission ErrorKind = "permission"
	// ErrorBudget is a call refused because a budget is used up.
	ErrorBudget ErrorKind = "budget"
	// ErrorBlocked is a call refused by a hook, a human, or doom-loop detection.
	ErrorBlocked ErrorKind = "blocked"
)

func (k ErrorKind) String() string { return string(k) }

// SubAgentResult is the outcome of a child harness, keyed by child harness id.
type SubAgentResult struct {
	HarnessID   string     `json:"harnessId"`
	AgentName   string     `json:"agentName"`
	StepID      string     `json:"stepId"`
	Status      Status     `json:"status"`
	Output      *string    `json:"output,omitempty"`
	Error       *string    `json:"error,omitempty"`
	Attempts    int        `json:"attempts,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

// AgentLoopSnapshot is the agent's own loop state: iteration, scratchpad, conversation, handoff.
type AgentLoopSnapshot struct {
	Iteration  int       `json:"iteration"`
	Scratchpad string    `json:"scratchpad,omitempty"`
	Messages   []Message `json:"messages,omitempty"`
	// Handoff is the agent's handoff state (handoff.json of the Ralph loop).
	Handoff JSONValue `json:"handoff,omitempty"`
	// Data is driver-specific state.
	Data JSONValue `json:"data,omitempty"`
}

// Message is one turn of an agent's conversation.
type Message struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCallID string            `json:"toolCallId,omitempty"`
	ToolCalls  []MessageToolCall `json:"toolCalls,omitempty"`
}

// MessageToolCall is a tool call the model asked for; Arguments is the model's raw text.
type MessageToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Budget holds a harness's limits (0: unlimited) and what it has used. Tool calls used are
// TotalToolCalls.
type Budget struct {
	ToolCalls     int           `json:"toolCalls,omitempty"`
	Tokens        int64         `json:"tokens,omitempty"`
	WallClock     time.Duration `json:"-"` // JSON: "wallClockMs"
	TokensUsed    int64         `json:"tokensUsed,omitempty"`
	WallClockUsed time.Duration `json:"-"` // JSON: "wallClockUsedMs"
	// CostMicroUSD is the cost limit and CostMicroUSDUsed what the agents reported spending, in
	// millionths of a US dollar (exact in every format). JSON: "costUsd", "costUsdUsed".
	CostMicroUSD     int64 `json:"-"`
	CostMicroUSDUsed int64 `json:"-"`
}

// MicroUSD converts US dollars to millionths of one, rounded; negative, NaN and huge amounts
// give ok false.
func MicroUSD(usd float64) (int64, bool) {
	if math.IsNaN(usd) || usd < 0 || usd > 1e12 {
		return 0, false
	}
	return int64(math.Round(usd * 1e6)), true
}

// USD converts millionths of a US dollar to dollars.
func USD(micro int64) float64 { return float64(micro) / 1e6 }

// SideEffect is one journaled side-effecting tool call: an intent while Result is nil (the call
// may or may not have run), a receipt once Result is set.
type SideEffect struct {
	StepID    string    `json:"stepId"`
	Tool      string    `json:"tool"`
	Arguments JSONValue `json:"arguments"`
	// Occurrence is 1 for the step's first call of Tool with these arguments, 2 for the second...
	Occurrence int         `json:"occurrence"`
	StartedAt  time.Time   `json:"startedAt"`
	Result     *ToolResult `json:"result,omitempty"`
	// GateID is the gate that decides whether an interrupted call runs again (replay: ask).
	GateID string `json:"gateId,omitempty"`
}

// Gate is a human approval gate.
type Gate struct {
	ID         string     `json:"id"`
	StepID     string     `json:"stepId"`
	Status     GateStatus `json:"status"`
	Kind       string     `json:"kind,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
}

// ValidationError says which field of a state is wrong and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid state: %s: %s", e.Field, e.Reason)
}

func oneOf[T comparable](v T, set []T) bool {
	for _, x := range set {
		if v == x {
			return true
		}
	}
	return false
}

// Validate checks what every persisted state must satisfy: identity fields present, enums known,
// counters non-negative, plan step ids unique and dependencies known. It does not judge
// lifecycle transitions (the runtime does).
func (s *HarnessState) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if s.SchemaVersion != SchemaVersion {
		return bad("schemaVersion", "is %d, this build writes %d", s.SchemaVersion, SchemaVersion)
	}
	if s.HarnessID == "" {
		return bad("harnessId", "is empty")
	}
	if !ValidHarnessID(s.HarnessID) {
		return bad("harnessId", "%q is not a harness id: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", s.HarnessID)
	}
	if s.ParentHarnessID != "" && !ValidHarnessID(s.ParentHarnessID) {
		return bad("parentHarnessId", "%q is not a harness id", s.ParentHarnessID)
	}
	for i, id := range s.SubAgentIDs {
		if !ValidHarnessID(id) {
			return bad(fmt.Sprintf("subAgentIds[%d]", i), "%q is not a harness id", id)
		}
	}
	if s.AgentName == "" {
		return bad("agentName", "is empty")
	}
	if !oneOf(s.Status, Statuses) {
		return bad("status", "%q is not one of %v", s.Status, Statuses)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"currentStepIndex", s.CurrentStepIndex}, {"totalToolCalls", s.TotalToolCalls},
		{"checkpointCount", s.CheckpointCount}, {"depth", s.Depth}, {"iterations", s.Iterations}} {
		if c.v < 0 {
			return bad(c.name, "is negative (%d)", c.v)
		}
	}
	if s.AutonomyLevel < 0 || s.AutonomyLevel > 5 {
		return bad("autonomyLevel", "is %d, want 1..5 (or 0: unset)", s.AutonomyLevel)
	}
	if p := s.Plan; p != nil {
		ids := make(map[string]bool, len(p.Steps))
		for i, st := range p.Steps {
			f := fmt.Sprintf("plan.steps[%d]", i)
			if st.ID == "" {
				return bad(f+".id", "is empty")
			}
			if ids[st.ID] {
				return bad(f+".id", "%q is used by an earlier step", st.ID)
			}
			ids[st.ID] = true
			if !oneOf(st.Status, StepStatuses) {
				return bad(f+".status", "%q is not one of %v", st.Status, StepStatuses)
			}
		}
		for i, st := range p.Steps {
			for _, d := range st.Dependencies {
				if !ids[d] {
					return bad(fmt.Sprintf("plan.steps[%d].dependencies", i), "%q is not a step of the plan", d)
				}
				if d == st.ID {
					return bad(fmt.Sprintf("plan.steps[%d].dependencies", i), "step %q depends on itself", d)
				}
			}
		}
		if cycle := planCycle(p); cycle != nil {
			return bad("plan", "its dependencies form a cycle: %s", idlist.Cycle(cycle, "step"))
		}
		if s.CurrentStepIndex >= max(len(p.Steps), 1) {
			return bad("currentStepIndex", "is %d, and the plan has %d steps", s.CurrentStepIndex, len(p.Steps))
		}
	} else if s.CurrentStepIndex != 0 {
		return bad("currentStepIndex", "is %d, and there is no plan", s.CurrentStepIndex)
	}
	for i, r := range s.ToolCallHistory {
		if r.CallName == "" {
			return bad(fmt.Sprintf("toolCallHistory[%d].callName", i), "is empty")
		}
		if r.Duration < 0 || r.RetryCount < 0 {
			return bad(fmt.Sprintf("toolCallHistory[%d]", i), "negative duration or retry count")
		}
	}
	for id, r := range s.SubAgentResults {
		if !oneOf(r.Status, Statuses) {
			return bad("subAgentResults["+id+"].status", "%q is not one of %v", r.Status, Statuses)
		}
	}
	for i, g := range s.Gates {
		if !oneOf(g.Status, GateStatuses) {
			return bad(fmt.Sprintf("gates[%d].status", i), "%q is not one of %v", g.Status, GateStatuses)
		}
	}
	for i, e := range s.SideEffects {
		f := fmt.Sprintf("sideEffects[%d]", i)
		if e.StepID == "" || e.Tool == "" {
			return bad(f, "has an empty stepId or tool")
		}
		if e.Occurrence < 1 {
			return bad(f+".occurrence", "is %d, want 1 or more", e.Occurrence)
		}
	}
	return nil
}

// ValidHarnessID reports whether id can name a harness: 1-128 characters of letters, digits,
// '.', '_' and '-', starting with a letter or digit (so it is safe as a key part and a file
// name).
func ValidHarnessID(id string) bool { return ident.Valid(id, 128, "._-") }

// planCycle returns the steps of a dependency cycle in the plan (the first step repeated at
// the end), or nil. Dependencies are known to name steps of the plan.
func planCycle(p *ExecutionPlan) []string {
	pos := make(map[string]int, len(p.Steps))
	for i, st := range p.Steps {
		pos[st.ID] = i
	}
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]uint8, len(p.Steps))
	var path []int
	var visit func(i int) []string
	visit = func(i int) []string {
		mark[i] = onPath
		path = append(path, i)
		for _, d := range p.Steps[i].Dependencies {
			j := pos[d]
			switch mark[j] {
			case onPath:
				k := slices.Index(path, j)
				var ids []string
				for _, x := range path[k:] {
					ids = append(ids, p.Steps[x].ID)
				}
				return append(ids, p.Steps[j].ID)
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		return nil
	}
	for i := range p.Steps {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Precision is that of the times and durations the runtime records in a state (tool calls, the
// checkpoint's time): a microsecond. The formats keep nanoseconds, and read them; the digits
// below a microsecond are a clock's noise, and they cost a stored harness about two bytes a tool
// call once compressed (2 % of a finished 1,000-step harness of real text).
const Precision = time.Microsecond

// Instant is t at Precision (rounded down), without its monotonic clock reading.
func Instant(t time.Time) time.Time { return t.Truncate(Precision) }

// Span is d at Precision (rounded to the nearest), at least Precision: a call that was recorded
// took some time.
func Span(d time.Duration) time.Duration { return max(d.Round(Precision), Precision) }
