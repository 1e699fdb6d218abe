// Package event is the event format: the closed set of event types, the Event record, its
// encoding in the durable log (one JSON object per event) and decoding back, and the sink
// interface with the built-in sinks (JSON lines, slog). Events are data: the harness makes them,
// the store writes the bytes Encode gives, and every reader decodes them here.
package event

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/statefmt"
)

// Type names an event. The set is closed: sinks and `events` rely on it.
type Type string

const (
	StateTransition Type = "state_transition" // from, to (reason when paused or failed)
	StepStarted     Type = "step_started"     // stepId, attempt
	StepCompleted   Type = "step_completed"   // stepId, attempt
	StepRetry       Type = "step_retry"       // stepId, attempt, message, delayMs
	StepFailed      Type = "step_failed"      // stepId, message, blocked
	PlanCompleted   Type = "plan_completed"   // steps
	ToolCall        Type = "tool_call"        // tool, durationMs, success (message on failure)
	Checkpoint      Type = "checkpoint"       // seq, kind, storedBytes
	Warning         Type = "warning"          // message
	Gate            Type = "gate"             // gateId, stepId, kind, action (waiting_for_human, approved, rejected), waitMs, reason
	SubAgent        Type = "sub_agent"        // subAgentId, stepId, agent, outcome (spawned, completed, failed, waiting), message
	SideEffect      Type = "side_effect"      // tool, stepId, action (intent, receipt, replayed, retry, skip, ask, rejected)
	Iteration       Type = "iteration"        // stepId, iteration, outcome, exitCode, durationMs, delayMs (rate limited), message
	Compaction      Type = "compaction"       // stepId, outcome (summarised, dropped), message
	Phase           Type = "phase"            // phase, action (started, completed)
	Governor        Type = "governor"         // stepId, action (waiting, resumed), message (why), waitMs
	Course          Type = "course"           // action (retry, ...), stepId, steps, by, reason, message (what changed)
)

// The outcomes of an iteration event.
const (
	IterStarted     = "started"        // an iteration starts (the others say how one ended)
	IterCompleted   = "completed"      // the promise was kept (or, without one, the command exited 0)
	IterContinue    = "continue"       // not done yet: another iteration follows
	IterFailed      = "failed"         // the command failed (non-zero exit): another iteration follows
	IterTimeout     = "timeout"        // the iteration ran out of time; its process group was killed
	IterRateLimited = "rate_limited"   // a rate limit: waits, does not count
	IterEmpty       = "empty"          // no output, no change in the workspace: does not count
	IterBreaker     = "breaker_open"   // the circuit breaker opened: the harness pauses
	IterBreakerDone = "breaker_closed" // resume closed it: the counts start again
	IterExhausted   = "max_iterations"
)

// Event is one structured event. Every event has its type, harness id and timestamp; the other
// fields depend on the type (see Type).
type Event struct {
	Type      Type      `json:"type"`
	HarnessID string    `json:"harnessId"`
	Time      time.Time `json:"ts"`
	// N is the event's number in the harness's durable log (0 until it is stored).
	N uint64 `json:"n,omitempty"`

	From   statefmt.Status `json:"from,omitempty"`
	To     statefmt.Status `json:"to,omitempty"`
	Reason string          `json:"reason,omitempty"`

	StepID  string   `json:"stepId,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Blocked []string `json:"blocked,omitempty"`
	Steps   int      `json:"steps,omitempty"`
	DelayMs float64  `json:"delayMs,omitempty"`

	Tool       string  `json:"tool,omitempty"`
	DurationMs float64 `json:"durationMs,omitempty"`
	Success    *bool   `json:"success,omitempty"`

	Seq         uint64 `json:"seq,omitempty"`
	Kind        string `json:"kind,omitempty"`
	StoredBytes int    `json:"storedBytes,omitempty"`

	GateID  string  `json:"gateId,omitempty"`
	Action  string  `json:"action,omitempty"`
	WaitMs  float64 `json:"waitMs,omitempty"`
	Outcome string  `json:"outcome,omitempty"`
	// SubAgentID is the child harness of a sub_agent event; Agent its agent.
	SubAgentID string `json:"subAgentId,omitempty"`
	Agent      string `json:"agent,omitempty"`
	// Iteration is an agent-loop iteration (a CLI agent's run, a model turn); ExitCode is how
	// the agent's command exited.
	Iteration int  `json:"iteration,omitempty"`
	ExitCode  *int `json:"exitCode,omitempty"`
	// Phase is the overnight-evolution phase of a phase event.
	Phase string `json:"phase,omitempty"`
	// CPUMs and RSSBytes are the process's CPU time (its own and its finished children's)
	// during a step attempt and its resident memory at the attempt's end (step_completed,
	// step_retry, step_failed).
	CPUMs    float64 `json:"cpuMs,omitempty"`
	RSSBytes int64   `json:"rssBytes,omitempty"`

	// Usage is what an agent reported of an iteration's model use (iteration events).
	Usage *Usage `json:"usage,omitempty"`

	// By is who changed a harness's course (a course event).
	By string `json:"by,omitempty"`

	Message string `json:"message,omitempty"`
}

// Usage is the model use an agent reported for one run or model turn: tokens by kind, the cost
// it computed, its session and its model.
type Usage struct {
	// InputTokens are the prompt tokens not read from a cache; CacheReadTokens those read from
	// one and CacheWriteTokens those written to one (Claude's cache_creation_input_tokens).
	InputTokens      int64 `json:"inputTokens,omitempty"`
	OutputTokens     int64 `json:"outputTokens,omitempty"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
	// CostUSD is the cost the agent reported (0: it reported none).
	CostUSD   float64 `json:"costUsd,omitempty"`
	SessionID string  `json:"sessionId,omitempty"`
	// Model is the model that answered, when the agent says (an openai agent's responses do).
	Model string `json:"model,omitempty"`
}

// Tokens is every token the run's model processed: input, cached input and output.
func (u Usage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Ms is a duration in (fractional) milliseconds, as events report durations.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Sink receives events. The durable event log in the store is written with each checkpoint (the
// events of a step are durable with the step's state); live sinks get them right after.
type Sink interface {
	Emit(e Event)
}

// JSONLines writes each event as one line of JSON.
type JSONLines struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONLines returns a sink writing to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

func (j *JSONLines) Emit(e Event) {
	b, _ := appendJSON(nil, &e)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.w.Write(append(b, '\n'))
}

// Slog logs each event at info level (warnings and failures at warn). With Quiet it logs only
// those at warn.
type Slog struct {
	L     *slog.Logger
	Quiet bool
}

func (s Slog) Emit(e Event) {
	level := slog.LevelInfo
	if e.Type == Warning || e.Type == StepFailed || e.To == statefmt.StatusFailed || e.Success != nil && !*e.Success {
		level = slog.LevelWarn
	}
	if s.Quiet && level < slog.LevelWarn {
		return
	}
	b, _ := appendJSON(nil, &e)
	// Numbers stay as written (json.Number): 31739904, not 3.1739904e+07.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var attrs map[string]any
	_ = dec.Decode(&attrs)
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		if k != "type" && k != "ts" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		v := attrs[k]
		if text, ok := v.(string); ok {
			v = LogText(text)
		}
		args = append(args, k, v)
	}
	s.L.Log(context.Background(), level, string(e.Type), args...)
}

// LogLimit bounds the text of one attribute in a log line. The event log keeps the whole text; a
// line of the daemon's log carries its first LogLimit bytes (a human's reason can be 64 KiB).
const LogLimit = 1000

// LogText is s for a log line: at most LogLimit bytes, cut between runes and saying how long it
// was.
func LogText(s string) string {
	if len(s) <= LogLimit {
		return s
	}
	cut := LogLimit
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a rune
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:cut], len(s))
}

// SinkFunc adapts a function.
type SinkFunc func(Event)

func (f SinkFunc) Emit(e Event) { f(e) }

// MaxBytes bounds one encoded event.
const MaxBytes = 1 << 20

// Encode is an event as the durable log stores it: its JSON, byte for byte what encoding/json
// writes.
func Encode(e Event) ([]byte, error) {
	b, err := appendJSON(make([]byte, 0, 192+len(e.Reason)+len(e.Message)), &e)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("harness %s: a %s event is %d bytes encoded (at most %d)", e.HarnessID, e.Type, len(b), MaxBytes)
	}
	return b, nil
}

// EncodeLog encodes the events of harness id's log, refusing (before anything is written) an
// event that names another harness or does not encode. Every store writes what it returns.
func EncodeLog(id string, events []Event) ([][]byte, error) {
	raw := make([][]byte, len(events))
	for i, e := range events {
		if e.HarnessID != id {
			return nil, fmt.Errorf("harness %s: event %d (%s) belongs to harness %q", id, i, e.Type, e.HarnessID)
		}
		b, err := Encode(e)
		if err != nil {
			return nil, fmt.Errorf("harness %s: event %d: %w", id, i, err)
		}
		raw[i] = b
	}
	return raw, nil
}

// Decode reads back event number n of harness id's log.
func Decode(id string, n uint64, data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("harness %s: event %d is not valid: %w", id, n, err)
	}
	e.N = n
	return e, nil
}
