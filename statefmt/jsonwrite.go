package statefmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// jsonWriter appends a state's indented JSON to one buffer in a single pass, field by field,
// without reflection: what EncodeJSON writes. Each struct's fields are written in the order
// and with the omission rules of its json tags (and of the MarshalJSON methods in json.go);
// TestPropertyEncodeJSONIsTheIndentingEncodersOutput holds it to encoding/json's output.
type jsonWriter struct {
	b     []byte
	depth int
	err   error // the first error; the writer goes on but its output is thrown away
	// out, when set, takes b whenever it holds jsonChunk bytes (WriteJSON); werr is its
	// first error, after which nothing more is written.
	out  io.Writer
	werr error
}

// spill hands b to out once it holds jsonChunk bytes. It is called after whole values, where
// nothing refers to an offset in b.
func (w *jsonWriter) spill() {
	if w.out != nil && len(w.b) >= jsonChunk {
		w.flush()
	}
}

// flush hands b to out (WriteJSON), unless encoding or writing failed already.
func (w *jsonWriter) flush() {
	if w.err == nil && w.werr == nil && len(w.b) > 0 {
		_, w.werr = w.out.Write(w.b)
	}
	w.b = w.b[:0]
}

// indentPrefixes[d] is the indentation of nesting depth d (two spaces a level).
var indentPrefixes = func() [16]string {
	var p [16]string
	for d := range p {
		p[d] = string(bytes.Repeat([]byte("  "), d))
	}
	return p
}()

func (w *jsonWriter) newline() {
	w.spill()
	w.b = append(w.b, '\n')
	for d := w.depth; d > 0; {
		n := min(d, len(indentPrefixes)-1)
		w.b = append(w.b, indentPrefixes[n]...)
		d -= n
	}
}

// open starts an object or array; each member then starts with member, and close ends it
// (an empty one is written as {} or []).
func (w *jsonWriter) open(c byte) bool {
	w.b = append(w.b, c)
	w.depth++
	return true
}

func (w *jsonWriter) member(first *bool) {
	if !*first {
		w.b = append(w.b, ',')
	}
	*first = false
	w.newline()
}

// key starts an object member: the key (a constant that needs no escaping) and ": ".
func (w *jsonWriter) key(first *bool, k string) {
	w.member(first)
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':', ' ')
}

func (w *jsonWriter) close(c byte, first bool) {
	w.depth--
	if !first {
		w.newline()
	}
	w.b = append(w.b, c)
}

func (w *jsonWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

func (w *jsonWriter) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

func (w *jsonWriter) null() { w.b = append(w.b, "null"...) }

// float writes f as encoding/json does (AppendJSONFloat).
func (w *jsonWriter) float(f float64) {
	b, err := AppendJSONFloat(w.b, f)
	if err != nil {
		w.fail(err)
		return
	}
	w.b = b
}

// AppendJSONFloat appends f as encoding/json writes a float64: like ES6's number to string,
// exponents from 1e21 and below 1e-6, unpadded. Like encoding/json it refuses NaN and the
// infinities.
func AppendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is written e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func (w *jsonWriter) time(t time.Time) {
	w.b = append(w.b, '"')
	b, err := t.AppendText(w.b)
	if err != nil {
		w.fail(err)
		return
	}
	w.b = append(b, '"')
}

func (w *jsonWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

const hexDigits = "0123456789abcdef"

// str writes s quoted as encoding/json does without HTML escaping (AppendJSONString).
func (w *jsonWriter) str(s string) {
	w.b = AppendJSONString(w.b, s, false)
	w.spill()
}

// AppendJSONString appends s quoted as encoding/json writes it: control characters, the quote
// and the backslash escaped (\b \f \n \r \t short), invalid UTF-8 as \ufffd, U+2028 and
// U+2029 escaped; with escapeHTML also <, > and & as \u003c, \u003e and \u0026, as Marshal
// does (an Encoder with SetEscapeHTML(false) does not).
func AppendJSONString(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a second look: most of a state's text is
		// tool output, long runs of plain ASCII between newlines.
		for !escapeHTML && i+8 <= len(s) && plainASCII8(s[i:i+8]) {
			i += 8
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainASCII8 reports whether each of the 8 bytes of s is ASCII that AppendJSONString writes
// as it is without HTML escaping: not a control character, the quote or the backslash. It tests
// them as one word: a byte below 0x20 or equal to '"' or '\\' sets the high bit of its lane in
// the terms below (a lane above one so flagged may be flagged too, by a borrow, which only sends
// those bytes to the byte loop), and a byte of 0x80 or more has it set already.
func plainASCII8(s string) bool {
	_ = s[7]
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return (x|(x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs == 0
}

func (w *jsonWriter) optStr(s *string) {
	if s == nil {
		w.null()
		return
	}
	w.str(*s)
}

// value writes a free-form value indented at the current depth (nil writes null). It is
// checked as encoding/json checks a MarshalJSON result: an invalid value is an error.
func (w *jsonWriter) value(v JSONValue) {
	if v == nil {
		w.null()
		return
	}
	prefix := indentPrefixes[min(w.depth, len(indentPrefixes)-1)]
	if w.depth >= len(indentPrefixes) {
		prefix = string(bytes.Repeat([]byte("  "), w.depth))
	}
	buf := bytes.NewBuffer(w.b)
	// Trailing spaces would be kept by Indent; a compacted value has none.
	if err := json.Indent(buf, bytes.TrimRight(v, " \t\r\n"), prefix, "  "); err != nil {
		w.fail(fmt.Errorf("json: invalid JSON value: %w", err))
		return
	}
	w.b = buf.Bytes()
}

func (w *jsonWriter) state(s *HarnessState) {
	first := w.open('{')
	w.key(&first, "schemaVersion")
	w.int(int64(s.SchemaVersion))
	w.key(&first, "harnessId")
	w.str(s.HarnessID)
	w.key(&first, "agentName")
	w.str(s.AgentName)
	w.key(&first, "taskId")
	w.str(s.TaskID)
	w.key(&first, "status")
	w.str(string(s.Status))
	w.key(&first, "createdAt")
	w.time(s.CreatedAt)
	w.key(&first, "updatedAt")
	w.time(s.UpdatedAt)
	w.key(&first, "plan")
	if s.Plan == nil {
		w.null()
	} else {
		w.plan(s.Plan)
	}
	w.key(&first, "currentStepIndex")
	w.int(int64(s.CurrentStepIndex))
	w.key(&first, "toolCallHistory")
	f := w.open('[')
	for i := range s.ToolCallHistory {
		w.member(&f)
		w.toolCall(&s.ToolCallHistory[i])
	}
	w.close(']', f)
	w.key(&first, "totalToolCalls")
	w.int(int64(s.TotalToolCalls))
	w.key(&first, "subAgentIds")
	f = w.open('[')
	for _, id := range s.SubAgentIDs {
		w.member(&f)
		w.str(id)
	}
	w.close(']', f)
	w.key(&first, "subAgentResults")
	keys := make([]string, 0, len(s.SubAgentResults))
	for k := range s.SubAgentResults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	f = w.open('{')
	for _, k := range keys {
		w.member(&f)
		w.str(k)
		w.b = append(w.b, ':', ' ')
		r := s.SubAgentResults[k]
		w.subAgentResult(&r)
	}
	w.close('}', f)
	w.key(&first, "agentLoopSnapshot")
	if s.AgentLoopSnapshot == nil {
		w.null()
	} else {
		w.snapshot(s.AgentLoopSnapshot)
	}
	w.key(&first, "lastCheckpointAt")
	if s.LastCheckpointAt == nil {
		w.null()
	} else {
		w.time(*s.LastCheckpointAt)
	}
	w.key(&first, "checkpointCount")
	w.int(int64(s.CheckpointCount))
	if s.ParentHarnessID != "" {
		w.key(&first, "parentHarnessId")
		w.str(s.ParentHarnessID)
	}
	if s.Depth != 0 {
		w.key(&first, "depth")
		w.int(int64(s.Depth))
	}
	if s.AutonomyLevel != 0 {
		w.key(&first, "autonomyLevel")
		w.int(int64(s.AutonomyLevel))
	}
	if s.StatusReason != "" {
		w.key(&first, "statusReason")
		w.str(s.StatusReason)
	}
	if s.Phase != "" {
		w.key(&first, "phase")
		w.str(s.Phase)
	}
	if s.Iterations != 0 {
		w.key(&first, "iterations")
		w.int(int64(s.Iterations))
	}
	if s.Budget != nil {
		w.key(&first, "budget")
		w.budget(s.Budget)
	}
	if len(s.Gates) > 0 {
		w.key(&first, "gates")
		f = w.open('[')
		for i := range s.Gates {
			w.member(&f)
			w.gate(&s.Gates[i])
		}
		w.close(']', f)
	}
	if len(s.SideEffects) > 0 {
		w.key(&first, "sideEffects")
		f = w.open('[')
		for i := range s.SideEffects {
			w.member(&f)
			w.sideEffect(&s.SideEffects[i])
		}
		w.close(']', f)
	}
	w.close('}', first)
}

func (w *jsonWriter) plan(p *ExecutionPlan) {
	first := w.open('{')
	w.key(&first, "taskId")
	w.str(p.TaskID)
	w.key(&first, "steps")
	f := w.open('[')
	for i := range p.Steps {
		w.member(&f)
		w.step(&p.Steps[i])
	}
	w.close(']', f)
	w.key(&first, "createdAt")
	w.time(p.CreatedAt)
	w.close('}', first)
}

func (w *jsonWriter) step(st *ExecutionStep) {
	first := w.open('{')
	w.key(&first, "id")
	w.str(st.ID)
	w.key(&first, "description")
	w.str(st.Description)
	w.key(&first, "assignedAgent")
	w.str(st.AssignedAgent)
	w.key(&first, "dependencies")
	f := w.open('[')
	for _, d := range st.Dependencies {
		w.member(&f)
		w.str(d)
	}
	w.close(']', f)
	w.key(&first, "critical")
	w.bool(st.Critical)
	w.key(&first, "status")
	w.str(string(st.Status))
	if st.Output != nil {
		w.key(&first, "output")
		w.str(*st.Output)
	}
	if st.Error != nil {
		w.key(&first, "error")
		w.str(*st.Error)
	}
	if st.Phase != "" {
		w.key(&first, "phase")
		w.str(st.Phase)
	}
	if st.Attempts != 0 {
		w.key(&first, "attempts")
		w.int(int64(st.Attempts))
	}
	if st.ChildHarnessID != "" {
		w.key(&first, "childHarnessId")
		w.str(st.ChildHarnessID)
	}
	w.close('}', first)
}

func (w *jsonWriter) toolCall(r *ToolCallRecord) {
	first := w.open('{')
	w.key(&first, "callName")
	w.str(r.CallName)
	w.key(&first, "arguments")
	w.value(r.Arguments)
	w.key(&first, "result")
	w.toolResult(&r.Result)
	w.key(&first, "duration")
	w.float(msOf(r.Duration))
	w.key(&first, "retryCount")
	w.int(int64(r.RetryCount))
	w.key(&first, "timestamp")
	w.time(r.Timestamp)
	w.close('}', first)
}

func (w *jsonWriter) toolResult(r *ToolResult) {
	first := w.open('{')
	w.key(&first, "success")
	w.bool(r.Success)
	if r.Output != "" {
		w.key(&first, "output")
		w.str(r.Output)
	}
	if len(r.Data) > 0 {
		w.key(&first, "data")
		w.value(r.Data)
	}
	if r.Error != "" {
		w.key(&first, "error")
		w.str(r.Error)
	}
	if r.ErrorKind != "" {
		w.key(&first, "errorKind")
		w.str(string(r.ErrorKind))
	}
	if r.Truncated {
		w.key(&first, "truncated")
		w.bool(true)
	}
	w.close('}', first)
}

func (w *jsonWriter) subAgentResult(r *SubAgentResult) {
	first := w.open('{')
	w.key(&first, "harnessId")
	w.str(r.HarnessID)
	w.key(&first, "agentName")
	w.str(r.AgentName)
	w.key(&first, "stepId")
	w.str(r.StepID)
	w.key(&first, "status")
	w.str(string(r.Status))
	if r.Output != nil {
		w.key(&first, "output")
		w.str(*r.Output)
	}
	if r.Error != nil {
		w.key(&first, "error")
		w.str(*r.Error)
	}
	if r.Attempts != 0 {
		w.key(&first, "attempts")
		w.int(int64(r.Attempts))
	}
	if r.CompletedAt != nil {
		w.key(&first, "completedAt")
		w.time(*r.CompletedAt)
	}
	w.close('}', first)
}

func (w *jsonWriter) snapshot(a *AgentLoopSnapshot) {
	first := w.open('{')
	w.key(&first, "iteration")
	w.int(int64(a.Iteration))
	if a.Scratchpad != "" {
		w.key(&first, "scratchpad")
		w.str(a.Scratchpad)
	}
	if len(a.Messages) > 0 {
		w.key(&first, "messages")
		f := w.open('[')
		for i := range a.Messages {
			w.member(&f)
			w.message(&a.Messages[i])
		}
		w.close(']', f)
	}
	if len(a.Handoff) > 0 {
		w.key(&first, "handoff")
		w.value(a.Handoff)
	}
	if len(a.Data) > 0 {
		w.key(&first, "data")
		w.value(a.Data)
	}
	w.close('}', first)
}

func (w *jsonWriter) message(m *Message) {
	first := w.open('{')
	w.key(&first, "role")
	w.str(m.Role)
	w.key(&first, "content")
	w.str(m.Content)
	if m.Name != "" {
		w.key(&first, "name")
		w.str(m.Name)
	}
	if m.ToolCallID != "" {
		w.key(&first, "toolCallId")
		w.str(m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		w.key(&first, "toolCalls")
		f := w.open('[')
		for _, c := range m.ToolCalls {
			w.member(&f)
			g := w.open('{')
			w.key(&g, "id")
			w.str(c.ID)
			w.key(&g, "name")
			w.str(c.Name)
			w.key(&g, "arguments")
			w.str(c.Arguments)
			w.close('}', g)
		}
		w.close(']', f)
	}
	w.close('}', first)
}

func (w *jsonWriter) budget(b *Budget) {
	first := w.open('{')
	if b.ToolCalls != 0 {
		w.key(&first, "toolCalls")
		w.int(int64(b.ToolCalls))
	}
	if b.Tokens != 0 {
		w.key(&first, "tokens")
		w.int(b.Tokens)
	}
	if v := msOf(b.WallClock); v != 0 {
		w.key(&first, "wallClockMs")
		w.float(v)
	}
	if b.TokensUsed != 0 {
		w.key(&first, "tokensUsed")
		w.int(b.TokensUsed)
	}
	if v := msOf(b.WallClockUsed); v != 0 {
		w.key(&first, "wallClockUsedMs")
		w.float(v)
	}
	if v := USD(b.CostMicroUSD); v != 0 {
		w.key(&first, "costUsd")
		w.float(v)
	}
	if v := USD(b.CostMicroUSDUsed); v != 0 {
		w.key(&first, "costUsdUsed")
		w.float(v)
	}
	w.close('}', first)
}

func (w *jsonWriter) gate(g *Gate) {
	first := w.open('{')
	w.key(&first, "id")
	w.str(g.ID)
	w.key(&first, "stepId")
	w.str(g.StepID)
	w.key(&first, "status")
	w.str(string(g.Status))
	if g.Kind != "" {
		w.key(&first, "kind")
		w.str(g.Kind)
	}
	if g.Reason != "" {
		w.key(&first, "reason")
		w.str(g.Reason)
	}
	w.key(&first, "createdAt")
	w.time(g.CreatedAt)
	if g.ResolvedAt != nil {
		w.key(&first, "resolvedAt")
		w.time(*g.ResolvedAt)
	}
	w.close('}', first)
}

func (w *jsonWriter) sideEffect(e *SideEffect) {
	first := w.open('{')
	w.key(&first, "stepId")
	w.str(e.StepID)
	w.key(&first, "tool")
	w.str(e.Tool)
	w.key(&first, "arguments")
	w.value(e.Arguments)
	w.key(&first, "occurrence")
	w.int(int64(e.Occurrence))
	w.key(&first, "startedAt")
	w.time(e.StartedAt)
	if e.Result != nil {
		w.key(&first, "result")
		w.toolResult(e.Result)
	}
	if e.GateID != "" {
		w.key(&first, "gateId")
		w.str(e.GateID)
	}
	w.close('}', first)
}

// jsonSizeHint is about the length of s's indented JSON, a little over when its text needs few
// escapes: EncodeJSON sizes its buffer with it once, up front. It adds up the text fields and
// a generous constant for each record's keys, numbers, times and indentation.
func jsonSizeHint(s *HarnessState) int {
	str := func(v string) int { return len(v) + len(v)/16 + 8 }
	opt := func(v *string) int {
		if v == nil {
			return 0
		}
		return str(*v) + 24
	}
	n := 1024 + str(s.HarnessID) + str(s.AgentName) + str(s.TaskID) + str(s.StatusReason) + str(s.ParentHarnessID) + str(s.Phase)
	if p := s.Plan; p != nil {
		n += 128 + str(p.TaskID)
		for i := range p.Steps {
			st := &p.Steps[i]
			n += 320 + str(st.ID) + str(st.Description) + str(st.AssignedAgent) + opt(st.Output) + opt(st.Error) + str(st.Phase) + str(st.ChildHarnessID)
			for _, d := range st.Dependencies {
				n += str(d) + 16
			}
		}
	}
	result := func(r *ToolResult) int {
		return 160 + str(r.Output) + 2*len(r.Data) + str(r.Error) + str(string(r.ErrorKind))
	}
	for i := range s.ToolCallHistory {
		r := &s.ToolCallHistory[i]
		n += 256 + str(r.CallName) + 2*len(r.Arguments) + result(&r.Result)
	}
	for _, id := range s.SubAgentIDs {
		n += str(id) + 8
	}
	for k, r := range s.SubAgentResults {
		n += 320 + str(k) + str(r.HarnessID) + str(r.AgentName) + str(r.StepID) + opt(r.Output) + opt(r.Error)
	}
	if a := s.AgentLoopSnapshot; a != nil {
		n += 128 + str(a.Scratchpad) + 2*len(a.Handoff) + 2*len(a.Data)
		for i := range a.Messages {
			m := &a.Messages[i]
			n += 192 + str(m.Role) + str(m.Content) + str(m.Name) + str(m.ToolCallID)
			for _, c := range m.ToolCalls {
				n += 128 + str(c.ID) + str(c.Name) + str(c.Arguments)
			}
		}
	}
	n += 512 * (1 + len(s.Gates))
	for i := range s.Gates {
		n += str(s.Gates[i].ID) + str(s.Gates[i].StepID) + str(s.Gates[i].Kind) + str(s.Gates[i].Reason)
	}
	for i := range s.SideEffects {
		e := &s.SideEffects[i]
		n += 256 + str(e.StepID) + str(e.Tool) + 2*len(e.Arguments) + str(e.GateID)
		if e.Result != nil {
			n += result(e.Result)
		}
	}
	return n
}
