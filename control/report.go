package control

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Report is the morning report: what the store's harnesses did in a window of time.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Counts has one entry per status among the harnesses in the window.
	Counts map[statefmt.Status]int `json:"counts"`
	// Harnesses are the top-level harnesses updated in the window, newest first.
	Harnesses []ReportEntry `json:"harnesses"`
	// Waiting lists every gate that waits for a human (in the window or before it).
	Waiting     []WaitingGate `json:"waiting"`
	Checkpoints int           `json:"checkpoints"`
	StoredBytes int           `json:"storedBytes"`
	// CostUSD is what the harnesses' agents reported spending, sub-agents included.
	CostUSD float64 `json:"costUsd,omitempty"`
	// StoreBytes is what the whole store takes on disk now (every harness, Pebble's logs and
	// tables): `prune` gives space back.
	StoreBytes uint64 `json:"storeBytes"`
	// Damaged lists the harnesses whose stored data is damaged, with what is damaged.
	Damaged []DamagedHarness `json:"damaged,omitempty"`
}

// DamagedHarness is a harness the store cannot read whole: `harness-edge verify` says more.
type DamagedHarness struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// ReportEntry is one harness in the report.
type ReportEntry struct {
	ID          string          `json:"id"`
	Agent       string          `json:"agent"`
	Task        string          `json:"task"`
	Status      statefmt.Status `json:"status"`
	Reason      string          `json:"reason,omitempty"`
	Phase       string          `json:"phase,omitempty"`
	StepsDone   int             `json:"stepsDone"`
	Steps       int             `json:"steps"`
	ToolCalls   int             `json:"toolCalls"`
	Iterations  int             `json:"iterations"`
	SubAgents   int             `json:"subAgents"`
	Checkpoints int             `json:"checkpoints"`
	StoredBytes int             `json:"storedBytes"`
	// Tokens and CostUSD are what its agents reported using (sub-agents' included); BudgetUSD
	// its cost limit (0: none).
	Tokens    int64     `json:"tokens,omitempty"`
	CostUSD   float64   `json:"costUsd,omitempty"`
	BudgetUSD float64   `json:"budgetUsd,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Failures are the failed steps with their errors.
	Failures []string `json:"failures,omitempty"`
	// StepCounts are its plan's steps by status; CallsOK and CallsFailed its history's records
	// (tool calls, and step commits in a git workspace) by outcome. The metrics sum them.
	StepCounts  map[statefmt.StepStatus]int `json:"stepCounts,omitempty"`
	CallsOK     int                         `json:"callsOk,omitempty"`
	CallsFailed int                         `json:"callsFailed,omitempty"`
	// Budget is its own budget's limits and use, named as the state's JSON names them (nil:
	// none), so that a list of harnesses shows budget use without reading each state.
	Budget *EntryBudget `json:"budget,omitempty"`
}

// EntryBudget is a harness's budget in its report entry: limits (0: none) and use.
type EntryBudget struct {
	ToolCalls       int     `json:"toolCalls,omitempty"`
	Tokens          int64   `json:"tokens,omitempty"`
	TokensUsed      int64   `json:"tokensUsed,omitempty"`
	WallClockMs     float64 `json:"wallClockMs,omitempty"`
	WallClockUsedMs float64 `json:"wallClockUsedMs,omitempty"`
}

// WaitingGate is a gate that waits for a human, with the command that answers it.
type WaitingGate struct {
	HarnessID string    `json:"harnessId"`
	Gate      string    `json:"gate"`
	Kind      string    `json:"kind"`
	StepID    string    `json:"stepId"`
	Since     time.Time `json:"since"`
	Why       string    `json:"why,omitempty"`
	// WaitsOn says what the gate waits on, as the command line words it: "before step ship",
	// "on the cost budget at step objective" (harness.GateOn).
	WaitsOn string `json:"waitsOn"`
}

// Report builds the morning report over the last `since` (0: everything).
func (s *Server) Report(_ context.Context, since time.Duration) (*Report, error) {
	now := time.Now().UTC()
	r := &Report{Until: now, Counts: map[statefmt.Status]int{}, Harnesses: []ReportEntry{}, Waiting: []WaitingGate{}}
	if since > 0 {
		r.Since = now.Add(-since)
	}
	list, err := s.store.List()
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	byID := make(map[string]store.IndexEntry, len(list))
	for _, e := range list {
		byID[e.ID] = e
		if e.ParentHarnessID != "" {
			children[e.ParentHarnessID] = append(children[e.ParentHarnessID], e.ID)
		}
	}
	kept := make(map[string]bool, len(list))
	for _, e := range list {
		if e.Damaged != "" {
			r.Damaged = append(r.Damaged, DamagedHarness{ID: e.ID, Reason: e.Damaged})
			continue
		}
		if e.ParentHarnessID != "" {
			continue // counted in their parent
		}
		if e.Status != statefmt.StatusPaused && e.UpdatedAt.Before(r.Since) {
			kept[e.ID] = true // a later report over a longer window may want its line
			continue          // neither in the window nor waiting: its index entry says so, unread
		}
		c, err := s.reportOf(e, reportKeyOf(e, children, byID))
		if errors.Is(err, store.ErrDamaged) {
			r.Damaged = append(r.Damaged, DamagedHarness{ID: e.ID, Reason: err.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		kept[e.ID] = true
		r.Waiting = append(r.Waiting, c.waiting...)
		if !c.entry.UpdatedAt.Before(r.Since) {
			r.Add(c.entry)
		}
	}
	s.reports.keep(kept)
	r.StoreBytes = s.store.DiskUsage()
	r.Sort()
	return r, nil
}

// reportCache keeps each top-level harness's report entry and waiting gates for as long as
// neither it nor any of its sub-agents checkpoints: a daemon's report and its metrics, which a
// monitoring system asks for every few seconds, read again only the harnesses that moved, not
// every state in the store.
type reportCache struct {
	mu      sync.Mutex
	entries map[string]cachedReport
}

type cachedReport struct {
	key     string
	entry   ReportEntry
	waiting []WaitingGate
}

func (c *reportCache) get(id, key string) (cachedReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.entries[id]
	return r, ok && r.key == key
}

func (c *reportCache) put(id string, r cachedReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cachedReport{}
	}
	c.entries[id] = r
}

// keep forgets the harnesses a report found neither in the store nor readable: deleted or
// damaged since. ids are the store's readable top-level harnesses, in the report's window or not.
func (c *reportCache) keep(ids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.entries {
		if !ids[id] {
			delete(c.entries, id)
		}
	}
}

// reportKeyOf names the checkpoints a harness's report entry is made of: its own newest and each
// of its sub-agents', at every depth (their gates are its waiting gates). The creation time tells
// a harness from an earlier one of the same id.
func reportKeyOf(e store.IndexEntry, children map[string][]string, entries map[string]store.IndexEntry) string {
	var b strings.Builder
	var add func(e store.IndexEntry)
	add = func(e store.IndexEntry) {
		fmt.Fprintf(&b, "%s@%d/%d/%d;", e.ID, e.HeadSeq, e.CreatedAt.UnixNano(), e.LastCheckpointAt.UnixNano())
		for _, id := range children[e.ID] {
			add(entries[id])
		}
	}
	add(e)
	return b.String()
}

// reportOf is a top-level harness's report entry and waiting gates, read from its state and its
// sub-agents' unless the cache has them for the same checkpoints (key).
func (s *Server) reportOf(e store.IndexEntry, key string) (cachedReport, error) {
	if c, ok := s.reports.get(e.ID, key); ok {
		return c, nil
	}
	st, err := s.State(context.Background(), e.ID)
	if err != nil {
		return cachedReport{}, err
	}
	c := cachedReport{key: key}
	if st.Status == statefmt.StatusPaused {
		loaded := s.m.Loaded(e.ID)
		gates, _ := s.m.PendingGates(e.ID)
		if !loaded {
			s.m.Release(e.ID)
		}
		for _, g := range gates {
			c.waiting = append(c.waiting, waitingGate(g))
		}
	}
	subs := make([]*statefmt.HarnessState, 0, len(st.SubAgentIDs))
	for _, id := range st.SubAgentIDs {
		if sub, err := s.State(context.Background(), id); err == nil {
			subs = append(subs, sub)
		}
	}
	c.entry = EntryOf(st, subs)
	for _, id := range append([]string{e.ID}, st.SubAgentIDs...) {
		if n, err := s.store.ChainBytes(id); err == nil {
			c.entry.StoredBytes += n
		}
	}
	s.reports.put(e.ID, c)
	return c, nil
}

// waitingGate is a pending gate as the report shows it, its text copied out of the state (see
// EntryOf).
func waitingGate(g harness.PendingGate) WaitingGate {
	return WaitingGate{HarnessID: strings.Clone(g.HarnessID), Gate: strings.Clone(g.Gate.ID), Kind: strings.Clone(g.Gate.Kind),
		StepID: strings.Clone(g.Gate.StepID), Since: g.Gate.CreatedAt, Why: strings.Clone(g.Gate.Reason), WaitsOn: harness.GateOn(g.Gate.Kind, g.Gate.StepID)}
}

// EntryOf builds a harness's report entry from its state and the states of its sub-agents
// that could be read: steps done, failures, tool calls, tokens and cost (its own and its
// sub-agents'). StoredBytes is the caller's, which knows where the records are. The entry's
// text is its own copy: a restored state's strings point into the buffer of the whole state
// (statefmt.DecodeBinaryOwned), and a report that kept a harness's id would keep its state,
// megabytes a harness over a store of thousands.
func EntryOf(st *statefmt.HarnessState, subs []*statefmt.HarnessState) ReportEntry {
	re := ReportEntry{ID: strings.Clone(st.HarnessID), Agent: strings.Clone(st.AgentName), Task: strings.Clone(st.TaskID), Status: st.Status,
		Reason: strings.Clone(st.StatusReason), Phase: strings.Clone(st.Phase),
		ToolCalls: st.TotalToolCalls, Iterations: st.Iterations, SubAgents: len(st.SubAgentIDs), Checkpoints: st.CheckpointCount,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt}
	if st.Plan != nil {
		re.Steps = len(st.Plan.Steps)
		re.StepCounts = map[statefmt.StepStatus]int{}
		for _, step := range st.Plan.Steps {
			re.StepCounts[step.Status]++
			switch step.Status {
			case statefmt.StepCompleted:
				re.StepsDone++
			case statefmt.StepFailed:
				msg := ""
				if step.Error != nil {
					msg = *step.Error
				}
				re.Failures = append(re.Failures, harness.StepFailure(step.ID, msg))
			}
		}
	}
	for _, c := range st.ToolCallHistory {
		if c.Result.Success {
			re.CallsOK++
		} else {
			re.CallsFailed++
		}
	}
	if b := st.Budget; b != nil {
		re.BudgetUSD = statefmt.USD(b.CostMicroUSD)
		re.Budget = &EntryBudget{ToolCalls: b.ToolCalls, Tokens: b.Tokens, TokensUsed: b.TokensUsed,
			WallClockMs: float64(b.WallClock) / float64(time.Millisecond), WallClockUsedMs: float64(b.WallClockUsed) / float64(time.Millisecond)}
	}
	var spent int64
	for _, sub := range append([]*statefmt.HarnessState{st}, subs...) {
		if b := sub.Budget; b != nil {
			re.Tokens += b.TokensUsed
			spent += b.CostMicroUSDUsed
		}
	}
	re.CostUSD = statefmt.USD(spent)
	return re
}

// Add counts a harness's entry in the report.
func (r *Report) Add(re ReportEntry) {
	r.CostUSD += re.CostUSD
	r.Counts[re.Status]++
	r.Checkpoints += re.Checkpoints
	r.StoredBytes += re.StoredBytes
	r.Harnesses = append(r.Harnesses, re)
}

// Sort puts the report's harnesses newest first.
func (r *Report) Sort() {
	sort.Slice(r.Harnesses, func(i, j int) bool { return r.Harnesses[i].UpdatedAt.After(r.Harnesses[j].UpdatedAt) })
}
