package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// PlanError is a plan that failed validation: every problem, one per line.
type PlanError struct{ Problems []string }

func (e *PlanError) Error() string {
	return "invalid plan:\n  " + strings.Join(e.Problems, "\n  ")
}

// newPlan validates steps (unique ids, descriptions, known agents and dependencies, no cycles,
// phases in order) and returns the execution plan with every step pending, then the ones without
// dependencies ready. Phases become dependencies: each step of a phase depends on every step of
// the phase before (task.PhaseDependencies).
func newPlan(taskID string, steps []task.PlanStep, knownAgent func(string) bool, now time.Time) (*statefmt.ExecutionPlan, error) {
	if errs := task.CheckPlan(steps, knownAgent); len(errs) > 0 {
		pe := &PlanError{}
		for _, e := range errs {
			where := "plan"
			if e.Step >= 0 {
				where = fmt.Sprintf("step %d", e.Step)
				if e.Step < len(steps) && steps[e.Step].ID != "" {
					where = fmt.Sprintf("step %q", steps[e.Step].ID)
				}
				if e.Field != "" {
					where += " " + e.Field
				}
			}
			pe.Problems = append(pe.Problems, where+": "+e.Msg)
		}
		return nil, pe
	}
	p := &statefmt.ExecutionPlan{TaskID: taskID, CreatedAt: now, Steps: make([]statefmt.ExecutionStep, len(steps))}
	implied := task.PhaseDependencies(steps)
	for i, s := range steps {
		p.Steps[i] = statefmt.ExecutionStep{ID: s.ID, Description: s.Description, AssignedAgent: s.Agent,
			Dependencies: append(append([]string{}, s.DependsOn...), implied[s.ID]...), Critical: s.Critical, Status: statefmt.StepPending, Phase: s.Phase}
	}
	refreshReady(p)
	return p, nil
}

func stepIndex(p *statefmt.ExecutionPlan, id string) int {
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return i
		}
	}
	return -1
}

// refreshReady makes every pending step whose dependencies have all completed ready, and
// returns their ids.
func refreshReady(p *statefmt.ExecutionPlan) []string {
	var ready []string
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Status != statefmt.StepPending {
			continue
		}
		all := true
		for _, d := range s.Dependencies {
			if j := stepIndex(p, d); j < 0 || p.Steps[j].Status != statefmt.StepCompleted {
				all = false
				break
			}
		}
		if all {
			s.Status = statefmt.StepReady
			ready = append(ready, s.ID)
		}
	}
	return ready
}

// completeStep records a step's output, marks it completed and returns the steps it made ready.
func completeStep(p *statefmt.ExecutionPlan, id, output string) []string {
	s := &p.Steps[stepIndex(p, id)]
	s.Status, s.Output, s.Error = statefmt.StepCompleted, &output, nil
	return refreshReady(p)
}

// failStep records a step's error, marks it failed, and blocks every step that depends on it,
// directly or through other steps; it returns the blocked ids in plan order.
func failStep(p *statefmt.ExecutionPlan, id, msg string) []string {
	s := &p.Steps[stepIndex(p, id)]
	s.Status, s.Error = statefmt.StepFailed, &msg
	doomed := map[string]bool{id: true}
	for changed := true; changed; {
		changed = false
		for i := range p.Steps {
			st := &p.Steps[i]
			if doomed[st.ID] {
				continue
			}
			for _, d := range st.Dependencies {
				if doomed[d] {
					doomed[st.ID], changed = true, true
					break
				}
			}
		}
	}
	var blocked []string
	for i := range p.Steps {
		st := &p.Steps[i]
		if st.ID != id && doomed[st.ID] && (st.Status == statefmt.StepPending || st.Status == statefmt.StepReady) {
			st.Status = statefmt.StepBlocked
			blocked = append(blocked, st.ID)
		}
	}
	return blocked
}

// nextReady returns the index of the first ready step in plan order, or -1.
func nextReady(p *statefmt.ExecutionPlan) int {
	for i := range p.Steps {
		if p.Steps[i].Status == statefmt.StepReady {
			return i
		}
	}
	return -1
}

// planOutcome summarises a plan with nothing ready or running: done says every step completed;
// otherwise failed and blocked list what stopped it.
func planOutcome(p *statefmt.ExecutionPlan) (done bool, failed, blocked []string) {
	done = true
	for _, s := range p.Steps {
		switch s.Status {
		case statefmt.StepCompleted:
		case statefmt.StepFailed:
			failed, done = append(failed, s.ID), false
		case statefmt.StepBlocked:
			blocked, done = append(blocked, s.ID), false
		default:
			done = false
		}
	}
	return done, failed, blocked
}
