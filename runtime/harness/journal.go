package harness

import (
	"bytes"
	"fmt"

	"github.com/harness-edge/harness-edge/runtime/tools"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/statefmt"
)

// journalIntent is called before a side-effecting call runs. The call is identified by its step,
// tool, arguments and occurrence (the n-th such call of the attempt), so the re-run of an
// interrupted attempt finds the entries of the calls it already made:
//   - no entry: the intent is journaled and persisted before the call runs (returns its index);
//   - a receipt: the call ran; its recorded result is returned and it is not run again;
//   - an intent alone: the call may have run. The tool's replay policy decides: retry runs it
//     again, skip returns a result saying so, ask opens a gate (the attempt suspends) and, once a
//     human decided, runs it again (approved) or not (rejected).
//
// It returns the entry's index when the call should run, or the result to use instead.
func (h *Harness) journalIntent(cur *attemptState, tool string, args statefmt.JSONValue, replay string) (int, *statefmt.ToolResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	step := cur.step
	key := tool + "\x00" + string(args)
	cur.occ[key]++
	occ := cur.occ[key]
	idx := -1
	for i, e := range h.st.SideEffects {
		if e.StepID == step && e.Tool == tool && e.Occurrence == occ && bytes.Equal(e.Arguments, args) {
			idx = i
		}
	}
	ev := event.Event{Type: event.SideEffect, Tool: tool, StepID: step}
	if idx < 0 {
		h.st.SideEffects = append(h.st.SideEffects, statefmt.SideEffect{StepID: step, Tool: tool, Arguments: args, Occurrence: occ, StartedAt: h.now()})
		ev.Action = "intent"
		h.emit(ev)
		if err := h.checkpoint(); err != nil {
			h.st.SideEffects = h.st.SideEffects[:len(h.st.SideEffects)-1]
			return -1, nil, err
		}
		return len(h.st.SideEffects) - 1, nil, nil
	}
	e := &h.st.SideEffects[idx]
	if e.Result != nil {
		ev.Action, ev.Message = "replayed", "the call ran before an interruption: its recorded result is used"
		h.emit(ev)
		r := *e.Result
		return -1, &r, nil
	}
	answer := func(action string, r statefmt.ToolResult) (int, *statefmt.ToolResult, error) {
		e.Result = &r
		ev.Action, ev.Message = action, r.Output+r.Error
		h.emit(ev)
		if err := h.checkpoint(); err != nil {
			e.Result = nil
			return -1, nil, err
		}
		return -1, &r, nil
	}
	switch replay {
	case "retry":
		ev.Action, ev.Message = "retry", "the call may have run before an interruption; running it again (replay: retry)"
		h.emit(ev)
		return idx, nil, nil
	case "skip":
		return answer("skip", statefmt.ToolResult{Success: true,
			Output: "not run again (replay: skip): the call may have run before an interruption"})
	}
	var g *statefmt.Gate
	for i := range h.st.Gates {
		if h.st.Gates[i].ID == e.GateID {
			g = &h.st.Gates[i]
		}
	}
	switch {
	case g != nil && g.Status == statefmt.GateApproved:
		// The approval covers one more run: it is used up (durably) before the call runs, so
		// an interruption of this run asks again.
		ev.Action, ev.Message = "retry", fmt.Sprintf("running the call again: gate %s approved it", g.ID)
		e.GateID, e.StartedAt = "", h.now()
		h.emit(ev)
		if err := h.checkpoint(); err != nil {
			e.GateID = g.ID
			return -1, nil, err
		}
		return idx, nil, nil
	case g != nil && g.Status == statefmt.GateRejected:
		return answer("rejected", tools.Failed(statefmt.ErrorPermanent, "not run again: gate %s rejected it: %s", g.ID, g.Reason))
	case g != nil:
		return -1, nil, &suspended{fmt.Sprintf("%s: %s may have run before an interruption", DescribeGate(g.ID, g.Kind, g.StepID), tool)}
	}
	why := fmt.Sprintf("%s %s may have run before an interruption (step %s); approve to run it again, reject to skip it", tool, args, step)
	g = h.addGateLocked(GateReplay, step, why)
	e.GateID = g.ID
	ev.Action, ev.Message = "ask", why
	h.emit(ev)
	return -1, nil, &suspended{DescribeGate(g.ID, g.Kind, g.StepID) + ": " + why}
}

// journalReceipt records a side-effecting call's result and persists it before the call's
// result is used.
func (h *Harness) journalReceipt(idx int, res statefmt.ToolResult) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := &h.st.SideEffects[idx]
	e.Result = &res
	h.emit(event.Event{Type: event.SideEffect, Tool: e.Tool, StepID: e.StepID, Action: "receipt", Success: &res.Success})
	if err := h.checkpoint(); err != nil {
		e.Result = nil
		return err
	}
	return nil
}
