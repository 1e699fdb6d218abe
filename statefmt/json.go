package statefmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// EncodeJSON writes s as HarnessState JSON v1: deterministic (fields in a fixed order, map keys
// sorted), indented for people, schemaVersion always written, times in RFC 3339 with their full
// sub-second precision. The core array and object fields are written as [] and {} when
// empty; harness-edge's additions are left out when zero.
//
// It is byte for byte what a json.Encoder with SetIndent("", "  ") and SetEscapeHTML(false)
// writes (the MarshalJSON methods below), made in one pass without reflection into one buffer
// sized up front from the state's text: a state of a few megabytes is written in milliseconds.
func EncodeJSON(s *HarnessState) ([]byte, error) {
	w := jsonWriter{b: make([]byte, 0, jsonSizeHint(s))}
	w.state(s)
	if w.err != nil {
		return nil, w.err
	}
	return append(w.b, '\n'), nil
}

// jsonChunk is how much of its JSON WriteJSON holds before it writes to its writer.
const jsonChunk = 64 << 10

// WriteJSON writes EncodeJSON's bytes to out as they are made, through a buffer of about 64 KiB
// (more only for a longer string): a state of megabytes is not held whole a second time, in a
// buffer the size of its JSON that would first be zeroed and then fault in page by page. A state
// EncodeJSON refuses is refused here too, but what was written before the refusal stays written.
func WriteJSON(out io.Writer, s *HarnessState) error {
	w := jsonWriter{b: make([]byte, 0, jsonChunk+jsonChunk/4), out: out}
	w.state(s)
	w.b = append(w.b, '\n')
	w.flush()
	if w.err != nil {
		return w.err
	}
	return w.werr
}

// DecodeJSON reads HarnessState JSON of any supported schema version (older ones are migrated),
// refusing unknown fields, trailing data (the probe below reads the whole input as one value) and
// invalid states. Errors say where (line and column
// where the decoder knows them) and why.
func DecodeJSON(data []byte) (*HarnessState, error) {
	v, err := PeekSchemaVersion(data)
	if err != nil {
		return nil, err
	}
	if v != SchemaVersion {
		if data, err = migrateJSON(data, v); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s HarnessState
	if err := dec.Decode(&s); err != nil {
		return nil, jsonError(data, err)
	}
	Normalize(&s)
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// PeekSchemaVersion returns the schemaVersion a HarnessState JSON document declares, without
// decoding the rest. It fails when the document is not one JSON object or the version is missing
// or not a number.
func PeekSchemaVersion(data []byte) (int, error) {
	var probe struct {
		SchemaVersion json.RawMessage `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return 0, jsonError(data, err)
	}
	if probe.SchemaVersion == nil {
		return 0, fmt.Errorf("schemaVersion is missing (supported versions: %s)", supportedVersions())
	}
	v, err := strconv.ParseInt(string(probe.SchemaVersion), 10, 32)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("schemaVersion %s is not a version number (supported versions: %s)", probe.SchemaVersion, supportedVersions())
	}
	return int(v), nil
}

// jsonError adds the line and column to the decoder's error where it gives an offset.
func jsonError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.As(err, &pe):
		// encoding/json gives no offset for a bad time; the first occurrence of the quoted value
		// is where it almost always is.
		if i := bytes.Index(data, []byte(strconv.Quote(pe.Value))); i >= 0 {
			off = int64(i)
		}
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("invalid HarnessState JSON: %w", err)
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Errorf("invalid HarnessState JSON at line %d, column %d: %w", line, col, err)
}

// strictUnmarshal decodes raw into v refusing unknown fields (custom UnmarshalJSON methods do
// not inherit the outer decoder's setting).
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// marshal is json.Marshal without HTML escaping, for the MarshalJSON methods below (the outer
// encoder cannot undo an inner escape).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func durationOfMs(ms float64, field string) (time.Duration, error) {
	if math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64)/float64(time.Millisecond) {
		return 0, fmt.Errorf("%s: %v is not a duration in milliseconds", field, ms)
	}
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}

// The core collections are written as [] or {} when empty, never null.

func (s HarnessState) MarshalJSON() ([]byte, error) {
	type plain HarnessState
	p := plain(s)
	if p.ToolCallHistory == nil {
		p.ToolCallHistory = []ToolCallRecord{}
	}
	if p.SubAgentIDs == nil {
		p.SubAgentIDs = []string{}
	}
	if p.SubAgentResults == nil {
		p.SubAgentResults = map[string]SubAgentResult{}
	}
	return marshal(p)
}

// plainStep is ExecutionStep without its MarshalJSON: a plan writes its steps as plainSteps so
// that encoding/json does not re-read each step's output.
type plainStep ExecutionStep

func (st ExecutionStep) plain() plainStep {
	q := plainStep(st)
	if q.Dependencies == nil {
		q.Dependencies = []string{}
	}
	return q
}

func (p ExecutionPlan) MarshalJSON() ([]byte, error) {
	steps := make([]plainStep, len(p.Steps))
	for i := range p.Steps {
		steps[i] = p.Steps[i].plain()
	}
	return marshal(struct {
		TaskID    string      `json:"taskId"`
		Steps     []plainStep `json:"steps"`
		CreatedAt time.Time   `json:"createdAt"`
	}{p.TaskID, steps, p.CreatedAt})
}

func (st ExecutionStep) MarshalJSON() ([]byte, error) { return marshal(st.plain()) }

// toolCallJSON is ToolCallRecord as JSON: the duration in (fractional) milliseconds.
type toolCallJSON struct {
	CallName   string     `json:"callName"`
	Arguments  JSONValue  `json:"arguments"`
	Result     ToolResult `json:"result"`
	Duration   float64    `json:"duration"`
	RetryCount int        `json:"retryCount"`
	Timestamp  time.Time  `json:"timestamp"`
}

func (r ToolCallRecord) MarshalJSON() ([]byte, error) {
	return marshal(toolCallJSON{r.CallName, r.Arguments, r.Result, msOf(r.Duration), r.RetryCount, r.Timestamp})
}

func (r *ToolCallRecord) UnmarshalJSON(raw []byte) error {
	var j toolCallJSON
	if err := strictUnmarshal(raw, &j); err != nil {
		return err
	}
	d, err := durationOfMs(j.Duration, "duration")
	if err != nil {
		return err
	}
	*r = ToolCallRecord{j.CallName, j.Arguments, j.Result, d, j.RetryCount, j.Timestamp}
	return nil
}

// budgetJSON is Budget as JSON: durations in milliseconds.
type budgetJSON struct {
	ToolCalls       int     `json:"toolCalls,omitempty"`
	Tokens          int64   `json:"tokens,omitempty"`
	WallClockMs     float64 `json:"wallClockMs,omitempty"`
	TokensUsed      int64   `json:"tokensUsed,omitempty"`
	WallClockUsedMs float64 `json:"wallClockUsedMs,omitempty"`
	CostUSD         float64 `json:"costUsd,omitempty"`
	CostUSDUsed     float64 `json:"costUsdUsed,omitempty"`
}

func (b Budget) MarshalJSON() ([]byte, error) {
	return marshal(budgetJSON{b.ToolCalls, b.Tokens, msOf(b.WallClock), b.TokensUsed, msOf(b.WallClockUsed), USD(b.CostMicroUSD), USD(b.CostMicroUSDUsed)})
}

func (b *Budget) UnmarshalJSON(raw []byte) error {
	var j budgetJSON
	if err := strictUnmarshal(raw, &j); err != nil {
		return err
	}
	wc, err := durationOfMs(j.WallClockMs, "budget.wallClockMs")
	if err != nil {
		return err
	}
	used, err := durationOfMs(j.WallClockUsedMs, "budget.wallClockUsedMs")
	if err != nil {
		return err
	}
	cost, ok := MicroUSD(j.CostUSD)
	if !ok {
		return fmt.Errorf("budget.costUsd: %v is not an amount of US dollars", j.CostUSD)
	}
	spent, ok := MicroUSD(j.CostUSDUsed)
	if !ok {
		return fmt.Errorf("budget.costUsdUsed: %v is not an amount of US dollars", j.CostUSDUsed)
	}
	*b = Budget{j.ToolCalls, j.Tokens, wc, j.TokensUsed, used, cost, spent}
	return nil
}

// Normalize puts s in the in-memory form every decoder returns: times in UTC without monotonic
// readings, empty slices and maps nil. Free-form JSON values are canonical already (JSONValue).
func Normalize(s *HarnessState) {
	t := func(x *time.Time) { *x = x.UTC().Round(0) }
	tp := func(x **time.Time) {
		if *x != nil {
			v := (*x).UTC().Round(0)
			*x = &v
		}
	}
	t(&s.CreatedAt)
	t(&s.UpdatedAt)
	tp(&s.LastCheckpointAt)
	if p := s.Plan; p != nil {
		t(&p.CreatedAt)
		if len(p.Steps) == 0 {
			p.Steps = nil
		}
		for i := range p.Steps {
			if len(p.Steps[i].Dependencies) == 0 {
				p.Steps[i].Dependencies = nil
			}
		}
	}
	if len(s.ToolCallHistory) == 0 {
		s.ToolCallHistory = nil
	}
	for i := range s.ToolCallHistory {
		t(&s.ToolCallHistory[i].Timestamp)
	}
	if len(s.SubAgentIDs) == 0 {
		s.SubAgentIDs = nil
	}
	if len(s.SubAgentResults) == 0 {
		s.SubAgentResults = nil
	}
	for k, r := range s.SubAgentResults {
		tp(&r.CompletedAt)
		s.SubAgentResults[k] = r
	}
	if a := s.AgentLoopSnapshot; a != nil {
		if len(a.Messages) == 0 {
			a.Messages = nil
		}
		for i := range a.Messages {
			if len(a.Messages[i].ToolCalls) == 0 {
				a.Messages[i].ToolCalls = nil
			}
		}
	}
	if len(s.Gates) == 0 {
		s.Gates = nil
	}
	for i := range s.Gates {
		t(&s.Gates[i].CreatedAt)
		tp(&s.Gates[i].ResolvedAt)
	}
	if len(s.SideEffects) == 0 {
		s.SideEffects = nil
	}
	for i := range s.SideEffects {
		t(&s.SideEffects[i].StartedAt)
	}
}
