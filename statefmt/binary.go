package statefmt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// BinaryFormatVersion is the binary layout this build writes (schema version 1).
// Versions only ever grow; a retired one stays reserved here. Every version is still read:
//
//	1: the first layout
//	2: the budget ends with the cost limit and the cost used (millionths of a dollar)
//	3: the plan's steps and their outputs move into the append-only log, beside the tool-call
//	   records; the plan lists its steps' entries by number
//	4: a step's output that is the start of a tool call's result (a script step's output is its
//	   tool's result) is a reference to that record, not a second copy of the text
//	5: a sub-agent result's output is a text entry of the log (most often its step's output),
//	   and the rest holds its reference
const BinaryFormatVersion = 5

const (
	binaryMagic   = "HES"
	headerLen     = 4  // magic + version
	trailerLen    = 16 // u64 LE log end offset, u64 LE tool-call record count
	maxBinaryInts = math.MaxInt64

	// The kinds of a log entry (layout 3): the low two bits of its length prefix.
	entryRecord = 0 // a ToolCallHistory record
	entryText   = 1 // a plan step's output
	entryStep   = 2 // a plan step, its output as a reference
	entryPrefix = 3 // a plan step's output that is the start of a record's result (layout 4)

	// minPrefixRef is the shortest output written as a reference to a record's result: a
	// shorter one costs about what the reference does.
	minPrefixRef = 16

	// A step's output reference (layout 3): absent, empty, or the text entry numbered ref-2.
	outputAbsent = 0
	outputEmpty  = 1
)

// The binary layout, version 5:
//
//	"HES" version:u8
//	log:     entry*               each: uvarint(len<<2 | kind) bytes
//	                              kind 0: a ToolCallHistory record (in order)
//	                              kind 1: the UTF-8 text of a plan step's output (never empty)
//	                              kind 2: a plan step (see writer.step); its output is
//	                              uvarint(ref): 0 absent, 1 empty, n >= 2 the log's text entry
//	                              number n-2 (counting text entries only, kinds 1 and 3, from 0)
//	                              kind 3 (layout 4): a plan step's output given as the first
//	                              uvarint(n) bytes of the result output of the log's tool-call
//	                              record uvarint(k), an earlier entry; it counts as a text entry
//	                              kind 1 also holds the output of a sub-agent result (layout 5)
//	                              that is not the text of an entry already there
//	rest:    every other field of HarnessState, in a fixed order (see writer.rest); the plan's
//	         steps are uvarint(count) and then, for each, the number of its step entry
//	         (counting step entries only, from 0); a sub-agent result's output is a reference
//	         like a step's (layout 5)
//	trailer: u64le(log end offset) u64le(tool-call record count)
//
// The log comes first and only ever grows, so a checkpoint that adds tool calls and changes a
// step leaves every earlier byte where it was: an encoder that remembers the previous encoding
// writes only the new entries and the rest, and the rest stays a few bytes per plan step however
// long the history, however large the outputs and the plan. A full encoding (EncodeBinary, or an
// encoder starting over) writes the records, then each step (after its output) in plan order; an
// encoder that went on from earlier encodings has them in the order they appeared, and may hold
// entries no step refers to any more (a step's earlier versions, a retried step's earlier
// output), until it starts over. Both decode to the same state.
//
// Versions 1 and 2 have only records: the log is uvarint(len) record-bytes*, and the plan's steps
// are written whole in the rest, each output as a presence byte and then the string. Version 1 also lacks the
// budget's two cost fields. Primitives: uvarint/svarint as in encoding/binary; strings are
// uvarint(len) + UTF-8 bytes; times are svarint(unix seconds) + uvarint(nanoseconds), UTC;
// optional values have a presence byte (0 absent, 1 present); enums are one byte, numbered from 1
// in the order of Statuses, StepStatuses and GateStatuses.

// ---------------------------------------------------------------------------------------------
// writing

type writer struct {
	b   []byte
	err error
	// steps are the plan steps' entry numbers in the log (layout 3), by index, for rest to
	// write; resultKeys are the sub-agent results' keys in order and resultRefs their outputs'
	// references (layout 5).
	steps      []uint64
	resultKeys []string
	resultRefs []uint64
	// refs is steps as rest writes them, a uvarint each, and refAt where each starts: kept
	// from one encoding to the next (refsOK), so that a checkpoint that changed a step or two
	// of a long plan rewrites their numbers, not every step's (34 µs a checkpoint at 10,000
	// steps on the build machine when rest wrote them all).
	refs   []byte
	refAt  []int32
	refsOK bool
}

// setStep sets step i's entry number, in steps and in refs.
func (w *writer) setStep(i int, entry uint64) {
	if w.steps[i] == entry {
		return
	}
	w.steps[i] = entry
	if !w.refsOK {
		return
	}
	at, end := int(w.refAt[i]), len(w.refs)
	if i+1 < len(w.refAt) {
		end = int(w.refAt[i+1])
	}
	var v [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(v[:], entry)
	if grew := n - (end - at); grew != 0 { // entry numbers only grow: a byte more, now and then
		w.refs = slices.Replace(w.refs, at, end, v[:n]...)
		for j := i + 1; j < len(w.refAt); j++ {
			w.refAt[j] += int32(grew)
		}
		return
	}
	copy(w.refs[at:end], v[:n])
}

// planRefs returns steps as uvarints, built again from steps when they were replaced whole.
func (w *writer) planRefs() []byte {
	if !w.refsOK {
		w.refs, w.refAt = w.refs[:0], w.refAt[:0]
		for _, entry := range w.steps {
			w.refAt = append(w.refAt, int32(len(w.refs)))
			w.refs = binary.AppendUvarint(w.refs, entry)
		}
		w.refsOK = true
	}
	return w.refs
}

// stepSeen is one plan step as the log holds it: its fields by value, its output's reference
// and its entry's number. A plan of thousands of steps, most of them done, changes a step or two
// per checkpoint; comparing a step's fields costs a few word compares when they are unchanged
// (Go compares equal string pointers without reading the bytes), and only a changed step is
// written again.
type stepSeen struct {
	st      ExecutionStep
	output  string
	hasOut  bool
	errText string
	hasErr  bool
	out     uint64 // the output reference written
	entry   uint64 // the step entry's number among the log's step entries
	size    int    // the step entry's and its output text's bytes in the log
	outSize int    // the output text entry's bytes in the log
}

// executionStepFields is how many fields stepSeen.same compares: a test checks it against the
// struct, so that a field added to ExecutionStep cannot be left out of the comparison.
const executionStepFields = 11

// same reports whether st has every field value the memo holds.
func (m *stepSeen) same(st *ExecutionStep) bool {
	a := &m.st
	if a.ID != st.ID || a.Description != st.Description || a.AssignedAgent != st.AssignedAgent ||
		a.Critical != st.Critical || a.Status != st.Status || a.Phase != st.Phase ||
		a.Attempts != st.Attempts || a.ChildHarnessID != st.ChildHarnessID ||
		len(a.Dependencies) != len(st.Dependencies) ||
		m.hasOut != (st.Output != nil) || (st.Output != nil && m.output != *st.Output) ||
		m.hasErr != (st.Error != nil) || (st.Error != nil && m.errText != *st.Error) {
		return false
	}
	for i, d := range a.Dependencies {
		if d != st.Dependencies[i] {
			return false
		}
	}
	return true
}

// set makes m the memo of step st, written as entry number entry with output reference out.
func (m *stepSeen) set(st *ExecutionStep, out, entry uint64, size int) {
	*m = stepSeen{st: *st, out: out, entry: entry, size: size}
	m.st.Output, m.st.Error = nil, nil
	if st.Output != nil {
		m.output, m.hasOut = *st.Output, true
	}
	if st.Error != nil {
		m.errText, m.hasErr = *st.Error, true
	}
	m.st.Dependencies = slices.Clone(st.Dependencies)
}

// step writes one plan step, its output as reference ref.
func (w *writer) step(st *ExecutionStep, ref uint64) {
	w.str("plan.steps.id", st.ID)
	w.str("plan.steps.description", st.Description)
	w.str("plan.steps.assignedAgent", st.AssignedAgent)
	w.uv(uint64(len(st.Dependencies)))
	for _, d := range st.Dependencies {
		w.str("plan.steps.dependencies", d)
	}
	w.flag(st.Critical)
	enumCode(w, "plan.steps.status", st.Status, StepStatuses)
	w.uv(ref)
	w.optStr("plan.steps.error", st.Error)
	w.str("plan.steps.phase", st.Phase)
	w.n("plan.steps.attempts", int64(st.Attempts))
	w.str("plan.steps.childHarnessId", st.ChildHarnessID)
}

func (w *writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("cannot encode state: "+format, args...)
	}
}

func (w *writer) uv(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) sv(v int64)  { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) u8(v byte)   { w.b = append(w.b, v) }

// n writes a non-negative int.
func (w *writer) n(field string, v int64) {
	if v < 0 {
		w.fail("%s is negative (%d)", field, v)
		v = 0
	}
	w.uv(uint64(v))
}

func (w *writer) str(field, s string) {
	if !utf8.ValidString(s) {
		w.fail("%s is not valid UTF-8", field)
	}
	w.uv(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) flag(b bool) {
	if b {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *writer) optStr(field string, s *string) {
	w.flag(s != nil)
	if s != nil {
		w.str(field, *s)
	}
}

func (w *writer) time(t time.Time) {
	w.sv(t.Unix())
	w.uv(uint64(t.Nanosecond()))
}

func (w *writer) optTime(t *time.Time) {
	w.flag(t != nil)
	if t != nil {
		w.time(*t)
	}
}

func (w *writer) json(field string, v JSONValue) {
	w.flag(v != nil)
	if v != nil {
		w.uv(uint64(len(v)))
		w.b = append(w.b, v...)
	}
}

func enumCode[T comparable](w *writer, field string, v T, set []T) {
	for i, x := range set {
		if x == v {
			w.u8(byte(i + 1))
			return
		}
	}
	w.fail("%s %v is not one of %v", field, v, set)
	w.u8(0)
}

func (w *writer) record(r *ToolCallRecord) {
	w.str("toolCallHistory.callName", r.CallName)
	w.json("toolCallHistory.arguments", r.Arguments)
	w.result("toolCallHistory.result", &r.Result)
	w.n("toolCallHistory.duration", int64(r.Duration))
	w.n("toolCallHistory.retryCount", int64(r.RetryCount))
	w.time(r.Timestamp)
}

func (w *writer) result(field string, res *ToolResult) {
	var flags byte
	if res.Success {
		flags |= 1
	}
	if res.Truncated {
		flags |= 2
	}
	w.u8(flags)
	w.str(field+".output", res.Output)
	w.json(field+".data", res.Data)
	w.str(field+".error", res.Error)
	w.str(field+".errorKind", string(res.ErrorKind))
}

// appendRecord appends one history record to the log.
func (w *writer) appendRecord(r *ToolCallRecord, scratch *writer) {
	scratch.b = scratch.b[:0]
	scratch.record(r)
	if scratch.err != nil && w.err == nil {
		w.err = scratch.err
	}
	w.uv(uint64(len(scratch.b))<<2 | entryRecord)
	w.b = append(w.b, scratch.b...)
}

// appendPrefix appends one step output given as the first n bytes of record k's result output.
func (w *writer) appendPrefix(k uint64, n int) {
	var b [2 * binary.MaxVarintLen64]byte
	p := binary.AppendUvarint(b[:0], k)
	p = binary.AppendUvarint(p, uint64(n))
	w.uv(uint64(len(p))<<2 | entryPrefix)
	w.b = append(w.b, p...)
}

// appendText appends the text of field (a step's output, a sub-agent result's) to the log.
func (w *writer) appendText(field, s string) {
	if !utf8.ValidString(s) {
		w.fail("%s is not valid UTF-8", field)
	}
	w.uv(uint64(len(s))<<2 | entryText)
	w.b = append(w.b, s...)
}

func (w *writer) rest(s *HarnessState) {
	w.n("schemaVersion", int64(s.SchemaVersion))
	w.str("harnessId", s.HarnessID)
	w.str("agentName", s.AgentName)
	w.str("taskId", s.TaskID)
	enumCode(w, "status", s.Status, Statuses)
	w.time(s.CreatedAt)
	w.time(s.UpdatedAt)
	w.flag(s.Plan != nil)
	if p := s.Plan; p != nil {
		w.str("plan.taskId", p.TaskID)
		w.uv(uint64(len(p.Steps)))
		w.b = append(w.b, w.planRefs()...)
		w.time(p.CreatedAt)
	}
	w.n("currentStepIndex", int64(s.CurrentStepIndex))
	w.n("totalToolCalls", int64(s.TotalToolCalls))
	w.uv(uint64(len(s.SubAgentIDs)))
	for _, id := range s.SubAgentIDs {
		w.str("subAgentIds", id)
	}
	w.uv(uint64(len(w.resultKeys)))
	for i, k := range w.resultKeys {
		r := s.SubAgentResults[k]
		w.str("subAgentResults.key", k)
		w.str("subAgentResults.harnessId", r.HarnessID)
		w.str("subAgentResults.agentName", r.AgentName)
		w.str("subAgentResults.stepId", r.StepID)
		enumCode(w, "subAgentResults.status", r.Status, Statuses)
		w.uv(w.resultRefs[i])
		w.optStr("subAgentResults.error", r.Error)
		w.n("subAgentResults.attempts", int64(r.Attempts))
		w.optTime(r.CompletedAt)
	}
	w.flag(s.AgentLoopSnapshot != nil)
	if a := s.AgentLoopSnapshot; a != nil {
		w.n("agentLoopSnapshot.iteration", int64(a.Iteration))
		w.str("agentLoopSnapshot.scratchpad", a.Scratchpad)
		w.uv(uint64(len(a.Messages)))
		for i := range a.Messages {
			m := &a.Messages[i]
			w.str("agentLoopSnapshot.messages.role", m.Role)
			w.str("agentLoopSnapshot.messages.content", m.Content)
			w.str("agentLoopSnapshot.messages.name", m.Name)
			w.str("agentLoopSnapshot.messages.toolCallId", m.ToolCallID)
			w.uv(uint64(len(m.ToolCalls)))
			for _, tc := range m.ToolCalls {
				w.str("agentLoopSnapshot.messages.toolCalls.id", tc.ID)
				w.str("agentLoopSnapshot.messages.toolCalls.name", tc.Name)
				w.str("agentLoopSnapshot.messages.toolCalls.arguments", tc.Arguments)
			}
		}
		w.json("agentLoopSnapshot.handoff", a.Handoff)
		w.json("agentLoopSnapshot.data", a.Data)
	}
	w.optTime(s.LastCheckpointAt)
	w.n("checkpointCount", int64(s.CheckpointCount))
	w.str("parentHarnessId", s.ParentHarnessID)
	w.n("depth", int64(s.Depth))
	w.n("autonomyLevel", int64(s.AutonomyLevel))
	w.str("statusReason", s.StatusReason)
	w.str("phase", s.Phase)
	w.n("iterations", int64(s.Iterations))
	w.flag(s.Budget != nil)
	if b := s.Budget; b != nil {
		w.n("budget.toolCalls", int64(b.ToolCalls))
		w.n("budget.tokens", b.Tokens)
		w.n("budget.wallClock", int64(b.WallClock))
		w.n("budget.tokensUsed", b.TokensUsed)
		w.n("budget.wallClockUsed", int64(b.WallClockUsed))
		w.n("budget.costMicroUsd", b.CostMicroUSD)
		w.n("budget.costMicroUsdUsed", b.CostMicroUSDUsed)
	}
	w.uv(uint64(len(s.Gates)))
	for i := range s.Gates {
		g := &s.Gates[i]
		w.str("gates.id", g.ID)
		w.str("gates.stepId", g.StepID)
		enumCode(w, "gates.status", g.Status, GateStatuses)
		w.str("gates.kind", g.Kind)
		w.str("gates.reason", g.Reason)
		w.time(g.CreatedAt)
		w.optTime(g.ResolvedAt)
	}
	w.uv(uint64(len(s.SideEffects)))
	for i := range s.SideEffects {
		e := &s.SideEffects[i]
		w.str("sideEffects.stepId", e.StepID)
		w.str("sideEffects.tool", e.Tool)
		w.json("sideEffects.arguments", e.Arguments)
		w.n("sideEffects.occurrence", int64(e.Occurrence))
		w.time(e.StartedAt)
		w.flag(e.Result != nil)
		if e.Result != nil {
			w.result("sideEffects.result", e.Result)
		}
		w.str("sideEffects.gateId", e.GateID)
	}
}

// ---------------------------------------------------------------------------------------------
// encoding

// Incremental is one encoding from a BinaryEncoder and how it relates to the previous one.
type Incremental struct {
	// Bytes is the whole encoding of the state.
	Bytes []byte
	// Prefix is how many leading bytes are identical to the previous encoding's. It is 0 when
	// there is no previous encoding to relate to (the first one, or after the encoder started
	// over): the caller then stores the state whole.
	Prefix int
	// Inserted is how many bytes after Prefix are new (0 when Prefix is): the log entries this
	// encoding added. What follows them is the rest of the state, which the previous encoding
	// held from Prefix on, changed only where the state's fields and plan changed.
	Inserted int
}

// BinaryEncoder encodes the successive states of one harness. It remembers the previous
// encoding: the log (tool-call records, plan steps and their outputs) is append-only, so a state
// whose history grew by k records and whose plan changed in j steps costs the encoding of those
// k records and j steps (and their new outputs) plus the rest of the state, which holds a number
// per plan step and the counters, whatever the size of the history and of the outputs.
//
// The history must only grow: a record, once encoded, is never changed in place. The encoder
// re-checks the last record it encoded each time (cheap) and starts over when the history shrank
// or that record changed. A step that changes is appended again (its output too, when that
// changed); when the entries no step refers to any more outweigh the live ones (and 1 MiB), the
// encoder starts over. The property tests check that every incremental encoding decodes to the
// state it encoded, like a full one. The slices in an Incremental stay valid until the next call
// to Encode. Not safe for concurrent use.
type BinaryEncoder struct {
	w         writer
	scratch   writer // one record or step at a time
	check     writer // the re-encoded last record, for lastRecordUnchanged
	histEnd   int    // where the log ends
	histCount int    // tool-call records in the log
	texts     uint64 // text entries in the log
	stepN     uint64 // step entries in the log
	logBytes  int    // the bytes of the text and step entries in the log
	liveBytes int    // those the last encoding's plan refers to
	lastRec   []byte
	memo      []stepSeen // by index in the plan: each step as the log last holds it
	// results are the sub-agent results' outputs as the log holds them, by key.
	results map[string]resultSeen
	// hist is the history being encoded, for a step output that is the start of a record's
	// result; byStart finds records by their result's first bytes, in a full encoding only.
	hist    []ToolCallRecord
	byStart map[string][]int
	full    bool // this encoding started from nothing
	// planBase is the first plan step of the last encoding: EncodeChanged relies on its caller's
	// word only for the same plan, in the same place, of the same length.
	planBase *ExecutionStep
	// narrowed counts the encodings that compared only the steps their caller named, so that
	// every fullEvery-th compares them all again.
	narrowed int
}

// StepChanges is what a caller of EncodeChanged knows of the plan since its previous encoding:
// with Known, the indexes of the only steps that may differ (any order, repeats allowed);
// without, nothing (every step is compared, as Encode does).
type StepChanges struct {
	Known   bool
	Indexes []int
}

// fullEvery bounds how long a change EncodeChanged's caller forgot to name could go unstored:
// every fullEvery-th encoding compares every step anyway.
const fullEvery = 256

// Reset makes the next Encode start from nothing.
func (e *BinaryEncoder) Reset() {
	e.w.b = e.w.b[:0]
	e.histEnd, e.histCount = 0, 0
	e.texts, e.stepN, e.logBytes, e.liveBytes = 0, 0, 0, 0
	e.lastRec = e.lastRec[:0]
	e.memo = e.memo[:0]
	clear(e.results)
	e.w.resultKeys = e.w.resultKeys[:0]
	e.w.refsOK = false
	e.planBase = nil
}

// stale reports whether the log holds more entries no step refers to than is worth keeping:
// more than the live ones and more than 1 MiB.
func (e *BinaryEncoder) stale() bool {
	dead := e.logBytes - e.liveBytes
	return dead > e.liveBytes && dead > 1<<20
}

// Encode encodes s, reusing what it can of the previous encoding.
func (e *BinaryEncoder) Encode(s *HarnessState) (Incremental, error) {
	return e.EncodeChanged(s, StepChanges{})
}

// EncodeChanged is Encode for a caller that knows which plan steps it changed since its
// previous encoding (of the same state object): only those are compared with what the log
// holds, instead of every step. A plan of thousands of steps then costs a checkpoint what its
// changed steps cost. The caller's word is taken only for the plan the last encoding saw (same
// steps array, same length); every fullEvery-th encoding compares every step anyway; and builds
// with the invariants tag check every step it was told had not changed.
func (e *BinaryEncoder) EncodeChanged(s *HarnessState, changes StepChanges) (Incremental, error) {
	hist := s.ToolCallHistory
	var prefix, prevTail int // the previous encoding's tail: its rest, which this one rewrites
	if e.histEnd == 0 || len(hist) < e.histCount || !e.lastRecordUnchanged(hist) || e.stale() {
		// Nothing to build on: the first encoding, or the history did not just grow.
		e.Reset()
		e.w.b = append(e.w.b, binaryMagic...)
		e.w.b = append(e.w.b, BinaryFormatVersion)
		e.histEnd = headerLen
	} else {
		prefix, prevTail = e.histEnd, len(e.w.b)-e.histEnd
	}
	e.w.err, e.scratch.err = nil, nil
	e.w.b = e.w.b[:e.histEnd]
	// Keep room to grow: append alone grows a large buffer by ~1.25x, copying the whole state
	// every few steps; doubling makes that copy rare (amortised O(1) per step). The room kept
	// for the records this encode appends grows with the state up to 64 KiB: a fixed 64 KiB
	// doubled a small state's buffer whenever it grew by a few bytes (a sub-agent of five
	// checkpoints kept 200 KB, and a daemon holds every harness that runs or waits).
	room := min(64<<10, 4<<10+e.histEnd/4)
	if need := e.histEnd + 2*prevTail + room; cap(e.w.b) < need {
		e.w.b = append(make([]byte, 0, max(2*cap(e.w.b), need+room)), e.w.b...)
	}
	for i := e.histCount; i < len(hist); i++ {
		start := len(e.w.b)
		e.w.appendRecord(&hist[i], &e.scratch)
		if i == len(hist)-1 {
			e.lastRec = append(e.lastRec[:0], e.w.b[start:]...)
		}
	}
	if e.w.err != nil {
		err := e.w.err
		e.Reset()
		return Incremental{}, err
	}
	e.histCount = len(hist)
	e.hist, e.full = hist, prefix == 0
	e.planEntries(s, changes)
	e.hist, e.byStart = nil, nil
	if e.w.err != nil {
		err := e.w.err
		e.Reset()
		return Incremental{}, err
	}
	e.resultEntries(s)
	if e.w.err != nil {
		err := e.w.err
		e.Reset()
		return Incremental{}, err
	}
	e.histEnd = len(e.w.b)
	e.w.rest(s)
	e.w.b = binary.LittleEndian.AppendUint64(e.w.b, uint64(e.histEnd))
	e.w.b = binary.LittleEndian.AppendUint64(e.w.b, uint64(e.histCount))
	if e.w.err != nil {
		err := e.w.err
		e.Reset()
		return Incremental{}, err
	}
	inc := Incremental{Bytes: e.w.b, Prefix: prefix}
	if prefix > 0 {
		inc.Inserted = e.histEnd - prefix
	}
	return inc, nil
}

// planEntries gives each plan step its entry number, appending to the log the steps that the
// previous encoding did not hold as they are now at the same place in the plan, and their
// outputs when those changed too. With changes known (see EncodeChanged), only the named steps
// are looked at; the others keep their entries.
func (e *BinaryEncoder) planEntries(s *HarnessState, changes StepChanges) {
	var steps []ExecutionStep
	if s.Plan != nil {
		steps = s.Plan.Steps
	}
	if e.narrow(steps, changes) {
		for _, i := range changes.Indexes {
			e.w.setStep(i, e.planStep(i, &steps[i]))
		}
		if checkInvariants {
			e.checkUnnamed(steps, changes.Indexes)
		}
		return
	}
	e.w.steps, e.w.refsOK = e.w.steps[:0], false
	for i := range steps {
		e.w.steps = append(e.w.steps, e.planStep(i, &steps[i]))
	}
	for i := len(steps); i < len(e.memo); i++ {
		e.liveBytes -= e.memo[i].size
	}
	e.memo = e.memo[:len(steps)]
	e.planBase = nil
	if len(steps) > 0 {
		e.planBase = &steps[0]
	}
}

// narrow reports whether this encoding may look at the changed steps only: the caller knows
// them, they are steps of the plan the last encoding saw whole, and it is not time for a full
// comparison.
func (e *BinaryEncoder) narrow(steps []ExecutionStep, changes StepChanges) bool {
	if !changes.Known || len(steps) == 0 || &steps[0] != e.planBase || len(steps) != len(e.memo) || len(steps) != len(e.w.steps) {
		return false
	}
	for _, i := range changes.Indexes {
		if i < 0 || i >= len(steps) {
			return false
		}
	}
	e.narrowed++
	return e.narrowed%fullEvery != 0
}

// planStep returns the entry number of plan step i as st is now: the one the log holds when
// st has not changed, else a new entry appended to the log (with its output when that changed).
func (e *BinaryEncoder) planStep(i int, st *ExecutionStep) uint64 {
	var m *stepSeen
	if i < len(e.memo) {
		m = &e.memo[i]
		if m.same(st) {
			return m.entry
		}
		e.liveBytes -= m.size
	} else {
		e.memo = append(e.memo, stepSeen{})
		m = &e.memo[i]
	}
	start := len(e.w.b)
	out := uint64(outputAbsent)
	switch {
	case st.Output == nil:
	case *st.Output == "":
		out = outputEmpty
	case m.hasOut && m.out > outputEmpty && m.st.ID == st.ID && m.output == *st.Output:
		out = m.out // the step changed, its output did not
	default:
		if k, ok := e.prefixRecord(*st.Output); ok {
			e.w.appendPrefix(uint64(k), len(*st.Output))
		} else {
			e.w.appendText("plan.steps.output", *st.Output)
		}
		e.texts++
		out = e.texts + outputEmpty
	}
	textSize := len(e.w.b) - start
	e.scratch.b = e.scratch.b[:0]
	e.scratch.step(st, out)
	if e.scratch.err != nil && e.w.err == nil {
		e.w.err = e.scratch.err
	}
	e.w.uv(uint64(len(e.scratch.b))<<2 | entryStep)
	e.w.b = append(e.w.b, e.scratch.b...)
	size := len(e.w.b) - start
	if out == m.out && out > outputEmpty {
		textSize = m.outSize
		size += textSize // the output's text, written earlier, is still live
	}
	e.logBytes += len(e.w.b) - start
	e.liveBytes += size
	m.set(st, out, e.stepN, size)
	m.outSize = textSize
	e.stepN++
	return m.entry
}

// resultSeen is a sub-agent result's output as the log holds it: the text, its reference, and
// the bytes of its own text entry (0 when it refers to a step's output's).
type resultSeen struct {
	output string
	ref    uint64
	size   int
}

// resultEntries gives each sub-agent result's output its reference (layout 5), for rest: the
// one it had when the text is the same, else the text entry of a plan step's output with that
// text (a completed child's output is its step's), else a new text entry. A parent of a
// thousand children so writes a few dozen bytes per child at each checkpoint, not every output
// again (1.6 MB a checkpoint, and the chain diffed it all).
func (e *BinaryEncoder) resultEntries(s *HarnessState) {
	keys := e.resultKeys(s.SubAgentResults)
	refs := e.w.resultRefs[:0]
	for _, k := range keys {
		refs = append(refs, e.resultRef(k, s.SubAgentResults[k].Output))
	}
	if len(e.results) > len(keys) {
		for k, m := range e.results {
			if _, ok := s.SubAgentResults[k]; !ok {
				e.liveBytes -= m.size
				delete(e.results, k)
			}
		}
	}
	e.w.resultKeys, e.w.resultRefs = keys, refs
}

// resultKeys returns the keys of results in order. A parent adds a child or two between two
// checkpoints and removes none: the previous encoding's keys, with the new ones put in their
// places, are the answer then, without sorting a thousand keys at every checkpoint.
func (e *BinaryEncoder) resultKeys(results map[string]SubAgentResult) []string {
	keys := e.w.resultKeys
	// e.results holds exactly the previous encoding's keys (Reset empties both).
	if added := len(results) - len(keys); added >= 0 && added <= 4 && len(keys) == len(e.results) {
		kept := true
		for _, k := range keys {
			if _, ok := results[k]; !ok {
				kept = false
				break
			}
		}
		if kept {
			for k := range results {
				if added == 0 {
					break
				}
				if _, seen := e.results[k]; !seen {
					i, _ := slices.BinarySearch(keys, k)
					keys = slices.Insert(keys, i, k)
					added--
				}
			}
			return keys
		}
	}
	keys = keys[:0]
	for k := range results {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// resultRef returns the reference of result k's output out (see resultEntries).
func (e *BinaryEncoder) resultRef(k string, out *string) uint64 {
	m, seen := e.results[k]
	if seen && out != nil && m.ref > outputEmpty && m.output == *out {
		return m.ref
	}
	e.liveBytes -= m.size
	m = resultSeen{}
	switch {
	case out == nil:
		m.ref = outputAbsent
	case *out == "":
		m.ref = outputEmpty
	default:
		m.output = *out
		for i := range e.memo {
			if st := &e.memo[i]; st.hasOut && st.out > outputEmpty && st.output == *out {
				m.ref = st.out
				break
			}
		}
		if m.ref == outputAbsent {
			start := len(e.w.b)
			e.w.appendText("subAgentResults.output", *out)
			e.texts++
			m.ref, m.size = e.texts+outputEmpty, len(e.w.b)-start
			e.logBytes += m.size
			e.liveBytes += m.size
		}
	}
	if e.results == nil {
		e.results = make(map[string]resultSeen)
	}
	e.results[k] = m
	return m.ref
}

// prefixRecord returns the number of the last tool-call record in the log whose result output
// starts with out, when out is long enough for a reference to pay: a step's output is most often
// its tool's result, or that result trimmed. It looks at the last few records, then (in a full
// encoding, where a step may have run long ago) at the last few whose results start with the
// same minPrefixRef bytes. The choice depends on the text alone, so equal states encode alike.
// A record that does not match costs a compare that stops at the first differing byte; one that
// does, a compare of out's bytes.
func (e *BinaryEncoder) prefixRecord(out string) (int, bool) {
	const tries = 8
	if len(out) < minPrefixRef {
		return 0, false
	}
	for i := e.histCount - 1; i >= max(0, e.histCount-tries); i-- {
		if startsWith(e.hist[i].Result.Output, out) {
			return i, true
		}
	}
	if !e.full || e.histCount <= tries {
		return 0, false
	}
	if e.byStart == nil {
		e.byStart = make(map[string][]int, e.histCount)
		for i, r := range e.hist[:e.histCount-tries] {
			if o := r.Result.Output; len(o) >= minPrefixRef {
				e.byStart[o[:minPrefixRef]] = append(e.byStart[o[:minPrefixRef]], i)
			}
		}
	}
	same := e.byStart[out[:minPrefixRef]]
	for j := len(same) - 1; j >= max(0, len(same)-tries); j-- {
		if startsWith(e.hist[same[j]].Result.Output, out) {
			return same[j], true
		}
	}
	return 0, false
}

// startsWith reports whether s starts with prefix, cut at a character boundary.
func startsWith(s, prefix string) bool {
	return strings.HasPrefix(s, prefix) && (len(prefix) == len(s) || utf8.RuneStart(s[len(prefix)]))
}

// checkUnnamed panics when a step EncodeChanged was not told of differs from what the log
// holds: its caller changed a step without saying so (builds with the invariants tag only).
func (e *BinaryEncoder) checkUnnamed(steps []ExecutionStep, named []int) {
	isNamed := make(map[int]bool, len(named))
	for _, i := range named {
		isNamed[i] = true
	}
	for i := range steps {
		if !isNamed[i] && !e.memo[i].same(&steps[i]) {
			panic(fmt.Sprintf("statefmt: plan step %d (%q) changed, but the encoder was told only of steps %v", i, steps[i].ID, named))
		}
	}
}

// lastRecordUnchanged re-encodes the last record the encoder has seen and compares.
func (e *BinaryEncoder) lastRecordUnchanged(hist []ToolCallRecord) bool {
	if e.histCount == 0 {
		return true
	}
	e.check.b, e.check.err = e.check.b[:0], nil
	e.check.appendRecord(&hist[e.histCount-1], &e.scratch)
	return e.check.err == nil && bytes.Equal(e.check.b, e.lastRec)
}

// EncodeBinary returns the canonical binary encoding of s (a fresh copy).
func EncodeBinary(s *HarnessState) ([]byte, error) {
	var e BinaryEncoder
	inc, err := e.Encode(s)
	if err != nil {
		return nil, err
	}
	return inc.Bytes, nil
}

// ---------------------------------------------------------------------------------------------
// decoding

// NewerBuild is how a decoding error says that a newer harness-edge wrote what this build cannot
// read: not damage, and nothing to repair or throw away (store.Repair refuses to touch it).
const NewerBuild = "a newer harness-edge wrote it"

// reader decodes with bounds checks everywhere; the first error sticks and says where.
type reader struct {
	// version is the layout's (BinaryFormatVersion or an older one).
	version byte
	b       []byte
	s       string // b's bytes as one string: decoded strings are slices of it, one allocation in all
	pos     int
	err     error
	// texts are the log's text entries (layout 3), for the steps' output references, and
	// stepSpans where its step entries are, for the plan's references.
	texts     []string
	stepSpans [][2]int
}

// DecodeError is a binary decoding failure: the offset and what was wrong.
type DecodeError struct {
	Offset int
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("invalid binary state at byte %d: %s", e.Offset, e.Reason)
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &DecodeError{Offset: r.pos, Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *reader) uv(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		r.fail("%s: truncated or overlong varint", field)
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) sv(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		r.fail("%s: truncated or overlong varint", field)
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) u8(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("%s: truncated", field)
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

// n reads a non-negative int.
func (r *reader) n(field string) int {
	v := r.uv(field)
	if v > maxBinaryInts {
		r.fail("%s: %d does not fit", field, v)
		return 0
	}
	return int(v)
}

// count reads a collection length, refusing one that the remaining bytes cannot hold (each
// element takes at least min bytes), so a forged count allocates nothing.
func (r *reader) count(field string, min int) int {
	v := r.uv(field)
	if r.err == nil && v > uint64((len(r.b)-r.pos)/min) {
		r.fail("%s: %d elements cannot fit in the %d bytes left", field, v, len(r.b)-r.pos)
		return 0
	}
	return int(v)
}

func (r *reader) raw(field string) []byte {
	n := r.uv(field)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail("%s: length %d runs past the end (%d bytes left)", field, n, len(r.b)-r.pos)
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *reader) str(field string) string {
	b := r.raw(field)
	if r.err == nil && !utf8.Valid(b) {
		r.fail("%s is not valid UTF-8", field)
	}
	if r.err != nil {
		return ""
	}
	return r.s[r.pos-len(b) : r.pos]
}

func (r *reader) flag(field string) bool {
	switch r.u8(field) {
	case 0:
		return false
	case 1:
		return true
	default:
		r.pos--
		r.fail("%s: presence byte is %d, want 0 or 1", field, r.b[r.pos])
		return false
	}
}

func (r *reader) optStr(field string) *string {
	if !r.flag(field) {
		return nil
	}
	s := r.str(field)
	return &s
}

// step reads one plan step's fields.
func (r *reader) step(st *ExecutionStep) {
	st.ID = r.str("plan.steps.id")
	st.Description = r.str("plan.steps.description")
	st.AssignedAgent = r.str("plan.steps.assignedAgent")
	if nd := r.count("plan.steps.dependencies", 1); nd > 0 {
		st.Dependencies = make([]string, nd)
		for j := range st.Dependencies {
			st.Dependencies[j] = r.str("plan.steps.dependencies")
		}
	}
	st.Critical = r.flag("plan.steps.critical")
	st.Status = enumOf(r, "plan.steps.status", StepStatuses)
	st.Output = r.stepOutput()
	st.Error = r.optStr("plan.steps.error")
	st.Phase = r.str("plan.steps.phase")
	st.Attempts = r.n("plan.steps.attempts")
	st.ChildHarnessID = r.str("plan.steps.childHarnessId")
}

// stepEntry reads plan step i (layout 3): the number of its entry in the log, then the entry.
func (r *reader) stepEntry(i int, st *ExecutionStep) {
	at := r.pos
	ref := r.uv("plan.steps")
	if r.err != nil {
		return
	}
	if ref >= uint64(len(r.stepSpans)) {
		r.pos = at
		r.fail("plan.steps[%d]: step entry %d does not exist (the log has %d)", i, ref, len(r.stepSpans))
		return
	}
	span := r.stepSpans[ref]
	rr := &reader{version: r.version, b: r.b[span[0]:span[1]], s: r.s[span[0]:span[1]], texts: r.texts}
	rr.step(st)
	if rr.err == nil && rr.pos != len(rr.b) {
		rr.fail("%d unread bytes at the end of the step entry", len(rr.b)-rr.pos)
	}
	if rr.err != nil {
		de := rr.err.(*DecodeError)
		de.Offset += span[0]
		de.Reason = fmt.Sprintf("plan.steps[%d] (log step entry %d): %s", i, ref, de.Reason)
		r.err = de
	}
}

// stepOutput reads a plan step's output: in the rest (layouts 1 and 2), or as a reference to a
// text entry of the log (layout 3).
func (r *reader) stepOutput() *string {
	if r.version < 3 {
		return r.optStr("plan.steps.output")
	}
	return r.textRef("plan.steps.output")
}

// textRef reads field as a reference to a text entry of the log: 0 absent, 1 empty, n >= 2 the
// text entry n-2.
func (r *reader) textRef(field string) *string {
	at := r.pos
	switch ref := r.uv(field); {
	case r.err != nil || ref == outputAbsent:
		return nil
	case ref == outputEmpty:
		s := ""
		return &s
	case ref-outputEmpty-1 < uint64(len(r.texts)):
		s := r.texts[ref-outputEmpty-1]
		return &s
	default:
		r.pos = at
		r.fail("%s: text entry %d does not exist (the log has %d)", field, ref-outputEmpty-1, len(r.texts))
		return nil
	}
}

func (r *reader) time(field string) time.Time {
	sec := r.sv(field)
	ns := r.uv(field)
	if ns >= 1e9 {
		r.fail("%s: %d nanoseconds", field, ns)
		return time.Time{}
	}
	return time.Unix(sec, int64(ns)).UTC()
}

func (r *reader) optTime(field string) *time.Time {
	if !r.flag(field) {
		return nil
	}
	t := r.time(field)
	return &t
}

func (r *reader) json(field string) JSONValue {
	if !r.flag(field) {
		return nil
	}
	b := r.raw(field)
	if r.err == nil && !json.Valid(b) {
		r.fail("%s is not valid JSON", field)
	}
	if string(b) == "null" {
		return nil
	}
	return JSONValue(slices.Clone(b))
}

func enumOf[T any](r *reader, field string, set []T) T {
	var zero T
	c := r.u8(field)
	if r.err != nil {
		return zero
	}
	if c == 0 || int(c) > len(set) {
		r.pos--
		r.fail("%s: code %d is not one of 1..%d", field, c, len(set))
		return zero
	}
	return set[c-1]
}

func (r *reader) record() ToolCallRecord {
	var t ToolCallRecord
	t.CallName = r.str("callName")
	t.Arguments = r.json("arguments")
	t.Result = r.result("result")
	t.Duration = time.Duration(r.n("duration"))
	t.RetryCount = r.n("retryCount")
	t.Timestamp = r.time("timestamp")
	return t
}

func (r *reader) result(field string) ToolResult {
	var res ToolResult
	flags := r.u8(field + " flags")
	if flags > 3 {
		r.fail("%s flags %#x has unknown bits", field, flags)
	}
	res.Success, res.Truncated = flags&1 != 0, flags&2 != 0
	res.Output = r.str(field + ".output")
	res.Data = r.json(field + ".data")
	res.Error = r.str(field + ".error")
	res.ErrorKind = ErrorKind(r.str(field + ".errorKind"))
	return res
}

func (r *reader) rest(s *HarnessState) {
	s.SchemaVersion = r.n("schemaVersion")
	s.HarnessID = r.str("harnessId")
	s.AgentName = r.str("agentName")
	s.TaskID = r.str("taskId")
	s.Status = enumOf(r, "status", Statuses)
	s.CreatedAt = r.time("createdAt")
	s.UpdatedAt = r.time("updatedAt")
	if r.flag("plan") {
		p := &ExecutionPlan{TaskID: r.str("plan.taskId")}
		minStep := 9
		if r.version >= 3 {
			minStep = 1 // an entry number
		}
		n := r.count("plan.steps", minStep)
		if n > 0 {
			p.Steps = make([]ExecutionStep, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			if r.version < 3 {
				r.step(&p.Steps[i])
			} else {
				r.stepEntry(i, &p.Steps[i])
			}
		}
		p.CreatedAt = r.time("plan.createdAt")
		s.Plan = p
	}
	s.CurrentStepIndex = r.n("currentStepIndex")
	s.TotalToolCalls = r.n("totalToolCalls")
	if n := r.count("subAgentIds", 1); n > 0 {
		s.SubAgentIDs = make([]string, n)
		for i := range s.SubAgentIDs {
			s.SubAgentIDs[i] = r.str("subAgentIds")
		}
	}
	if n := r.count("subAgentResults", 9); n > 0 {
		s.SubAgentResults = make(map[string]SubAgentResult, n)
		prev := ""
		for i := 0; i < n && r.err == nil; i++ {
			k := r.str("subAgentResults.key")
			if i > 0 && k <= prev {
				r.fail("subAgentResults keys are not in strictly ascending order (%q after %q)", k, prev)
			}
			prev = k
			var v SubAgentResult
			v.HarnessID = r.str("subAgentResults.harnessId")
			v.AgentName = r.str("subAgentResults.agentName")
			v.StepID = r.str("subAgentResults.stepId")
			v.Status = enumOf(r, "subAgentResults.status", Statuses)
			if r.version < 5 {
				v.Output = r.optStr("subAgentResults.output")
			} else {
				v.Output = r.textRef("subAgentResults.output")
			}
			v.Error = r.optStr("subAgentResults.error")
			v.Attempts = r.n("subAgentResults.attempts")
			v.CompletedAt = r.optTime("subAgentResults.completedAt")
			s.SubAgentResults[k] = v
		}
	}
	if r.flag("agentLoopSnapshot") {
		a := &AgentLoopSnapshot{Iteration: r.n("agentLoopSnapshot.iteration"), Scratchpad: r.str("agentLoopSnapshot.scratchpad")}
		if n := r.count("agentLoopSnapshot.messages", 5); n > 0 {
			a.Messages = make([]Message, n)
			for i := 0; i < n && r.err == nil; i++ {
				m := &a.Messages[i]
				m.Role = r.str("messages.role")
				m.Content = r.str("messages.content")
				m.Name = r.str("messages.name")
				m.ToolCallID = r.str("messages.toolCallId")
				if nt := r.count("messages.toolCalls", 3); nt > 0 {
					m.ToolCalls = make([]MessageToolCall, nt)
					for j := range m.ToolCalls {
						m.ToolCalls[j] = MessageToolCall{r.str("toolCalls.id"), r.str("toolCalls.name"), r.str("toolCalls.arguments")}
					}
				}
			}
		}
		a.Handoff = r.json("agentLoopSnapshot.handoff")
		a.Data = r.json("agentLoopSnapshot.data")
		s.AgentLoopSnapshot = a
	}
	s.LastCheckpointAt = r.optTime("lastCheckpointAt")
	s.CheckpointCount = r.n("checkpointCount")
	s.ParentHarnessID = r.str("parentHarnessId")
	s.Depth = r.n("depth")
	s.AutonomyLevel = r.n("autonomyLevel")
	s.StatusReason = r.str("statusReason")
	s.Phase = r.str("phase")
	s.Iterations = r.n("iterations")
	if r.flag("budget") {
		s.Budget = &Budget{
			ToolCalls: r.n("budget.toolCalls"), Tokens: int64(r.n("budget.tokens")),
			WallClock: time.Duration(r.n("budget.wallClock")), TokensUsed: int64(r.n("budget.tokensUsed")),
			WallClockUsed: time.Duration(r.n("budget.wallClockUsed")),
		}
		if r.version >= 2 {
			s.Budget.CostMicroUSD, s.Budget.CostMicroUSDUsed = int64(r.n("budget.costMicroUsd")), int64(r.n("budget.costMicroUsdUsed"))
		}
	}
	if n := r.count("gates", 7); n > 0 {
		s.Gates = make([]Gate, n)
		for i := 0; i < n && r.err == nil; i++ {
			g := &s.Gates[i]
			g.ID = r.str("gates.id")
			g.StepID = r.str("gates.stepId")
			g.Status = enumOf(r, "gates.status", GateStatuses)
			g.Kind = r.str("gates.kind")
			g.Reason = r.str("gates.reason")
			g.CreatedAt = r.time("gates.createdAt")
			g.ResolvedAt = r.optTime("gates.resolvedAt")
		}
	}
	if n := r.count("sideEffects", 8); n > 0 {
		s.SideEffects = make([]SideEffect, n)
		for i := 0; i < n && r.err == nil; i++ {
			e := &s.SideEffects[i]
			e.StepID = r.str("sideEffects.stepId")
			e.Tool = r.str("sideEffects.tool")
			e.Arguments = r.json("sideEffects.arguments")
			e.Occurrence = r.n("sideEffects.occurrence")
			e.StartedAt = r.time("sideEffects.startedAt")
			if r.flag("sideEffects.result") {
				res := r.result("sideEffects.result")
				e.Result = &res
			}
			e.GateID = r.str("sideEffects.gateId")
		}
	}
}

// DecodeBinary decodes a binary state (any layout version this build reads), refusing anything malformed: bad magic or
// version, lengths past the end, counts the bytes cannot hold, unknown enum codes, invalid UTF-8
// or JSON, trailing bytes, and states that fail Validate. It never panics, and allocates at most
// a small multiple of its input.
func DecodeBinary(b []byte) (*HarnessState, error) {
	return decodeBinary(b, string(b), true)
}

// DecodeBinaryOwned is DecodeBinary for a buffer the caller hands over: the decoded strings
// point into b instead of a copy of it, so b must never be written again (nor reused). It saves
// a copy of the whole state when restoring a large one.
func DecodeBinaryOwned(b []byte) (*HarnessState, error) {
	return decodeBinary(b, unsafe.String(unsafe.SliceData(b), len(b)), true)
}

// prefixText reads a text entry given as the start of a record's result output (layout 4): the
// record is one decoded before it, and the text is a non-empty run of whole characters.
func prefixText(b []byte, records []ToolCallRecord, n int) (string, error) {
	k, a := binary.Uvarint(b)
	if a <= 0 {
		return "", fmt.Errorf("log text entry %d: the record's number is truncated or overlong", n)
	}
	size, c := binary.Uvarint(b[a:])
	if c <= 0 || a+c != len(b) {
		return "", fmt.Errorf("log text entry %d: the text's length is truncated, overlong or followed by %d bytes", n, max(0, len(b)-a-c))
	}
	if k >= uint64(len(records)) {
		return "", fmt.Errorf("log text entry %d: refers to tool-call record %d, but only %d come before it", n, k, len(records))
	}
	out := records[k].Result.Output
	if size == 0 || size > uint64(len(out)) {
		return "", fmt.Errorf("log text entry %d: takes %d bytes of tool-call record %d's %d-byte result", n, size, k, len(out))
	}
	if size < uint64(len(out)) && !utf8.RuneStart(out[size]) {
		return "", fmt.Errorf("log text entry %d: takes %d bytes of tool-call record %d's result, which cuts a character", n, size, k)
	}
	return out[:size], nil
}

// decodeBinary decodes b; whole holds the same bytes as a string, and every decoded string is a
// slice of it: one allocation (or none) instead of one per field. validate false skips
// Validate (for tests of the layout on states no run would make).
func decodeBinary(b []byte, whole string, validate bool) (*HarnessState, error) {
	if len(b) < headerLen+trailerLen {
		return nil, &DecodeError{0, fmt.Sprintf("%d bytes is too short for a binary state", len(b))}
	}
	if string(b[:3]) != binaryMagic {
		return nil, &DecodeError{0, "bad magic (not a harness-edge binary state)"}
	}
	if b[3] > BinaryFormatVersion {
		return nil, &DecodeError{3, fmt.Sprintf("binary format version %d is not supported (supported: 1 to %d): %s; read it with that version or a later one", b[3], BinaryFormatVersion, NewerBuild)}
	}
	if b[3] < 1 {
		return nil, &DecodeError{3, fmt.Sprintf("binary format version %d is not supported (supported: 1 to %d)", b[3], BinaryFormatVersion)}
	}
	end := len(b) - trailerLen
	histEnd := binary.LittleEndian.Uint64(b[end:])
	histCount := binary.LittleEndian.Uint64(b[end+8:])
	if histEnd < headerLen || histEnd > uint64(end) {
		return nil, &DecodeError{end, fmt.Sprintf("history end offset %d is outside the state (%d..%d)", histEnd, headerLen, end)}
	}
	// Each record takes at least 12 bytes (length prefix included); a forged count cannot make
	// us allocate.
	if histCount > (histEnd-headerLen)/12 {
		return nil, &DecodeError{end + 8, fmt.Sprintf("%d history records cannot fit in %d bytes", histCount, histEnd-headerLen)}
	}
	s := &HarnessState{}
	r := &reader{version: b[3], b: b[:histEnd], s: whole[:histEnd], pos: headerLen}
	if histCount > 0 {
		s.ToolCallHistory = make([]ToolCallRecord, histCount)
	}
	for i := 0; r.pos < int(histEnd) || i < len(s.ToolCallHistory); {
		at := r.pos
		kind := uint64(entryRecord)
		var rb []byte
		if r.version < 3 {
			rb = r.raw("toolCallHistory record")
		} else {
			head := r.uv("log entry")
			kind = head & 3
			if r.err == nil && head>>2 > uint64(len(r.b)-r.pos) {
				r.fail("log entry: length %d runs past the end of the log (%d bytes left)", head>>2, len(r.b)-r.pos)
			}
			if r.err == nil {
				rb = r.b[r.pos : r.pos+int(head>>2)]
				r.pos += len(rb)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		switch kind {
		case entryStep:
			if len(rb) == 0 {
				return nil, &DecodeError{at, fmt.Sprintf("log step entry %d is empty", len(r.stepSpans))}
			}
			r.stepSpans = append(r.stepSpans, [2]int{r.pos - len(rb), r.pos})
			continue
		case entryPrefix:
			if r.version < 4 {
				return nil, &DecodeError{at, fmt.Sprintf("log entry of unknown kind %d (binary format version %d)", kind, r.version)}
			}
			text, err := prefixText(rb, s.ToolCallHistory[:i], len(r.texts))
			if err != nil {
				return nil, &DecodeError{at, err.Error()}
			}
			r.texts = append(r.texts, text)
			continue
		case entryText, entryRecord:
		default:
			return nil, &DecodeError{at, fmt.Sprintf("log entry of unknown kind %d", kind)}
		}
		if kind == entryText {
			if len(rb) == 0 {
				// An empty output is reference 1; refusing empty entries also bounds how many
				// entries a forged log can make the decoder keep.
				return nil, &DecodeError{at, fmt.Sprintf("log text entry %d is empty", len(r.texts))}
			}
			if !utf8.Valid(rb) {
				return nil, &DecodeError{at, fmt.Sprintf("log text entry %d is not valid UTF-8", len(r.texts))}
			}
			r.texts = append(r.texts, r.s[r.pos-len(rb):r.pos])
			continue
		}
		if i == len(s.ToolCallHistory) {
			return nil, &DecodeError{at, fmt.Sprintf("the log holds more than the %d tool-call records the trailer says", histCount)}
		}
		rr := &reader{version: r.version, b: rb, s: r.s[r.pos-len(rb) : r.pos]}
		s.ToolCallHistory[i] = rr.record()
		if rr.err == nil && rr.pos != len(rb) {
			rr.fail("%d unread bytes at the end of the record", len(rb)-rr.pos)
		}
		if rr.err != nil {
			de := rr.err.(*DecodeError)
			de.Offset += r.pos - len(rb)
			de.Reason = fmt.Sprintf("toolCallHistory[%d]: %s", i, de.Reason)
			return nil, de
		}
		i++
	}
	if r.pos != int(histEnd) {
		return nil, &DecodeError{r.pos, fmt.Sprintf("history section has %d bytes after its %d records", int(histEnd)-r.pos, histCount)}
	}
	r.b, r.s = b[:end], whole[:end]
	r.rest(s)
	if r.err == nil && r.pos != end {
		r.fail("%d trailing bytes before the trailer", end-r.pos)
	}
	if r.err != nil {
		return nil, r.err
	}
	if !validate {
		return s, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}
