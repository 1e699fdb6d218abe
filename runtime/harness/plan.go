package harness

import (
	"fmt"
	"slices"
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
	indexPlan(p).refreshAll()
	return p, nil
}

// planIndex answers a plan's questions by index: where a step is, which steps depend on it, and
// where the first unfinished step is. No per-step operation of a run then scans the plan or its
// history: a step's completion looks at its dependents only, and the next ready step is found
// from the first unfinished one. It indexes the plan's structure (ids and dependencies), which
// does not change once the plan is made; statuses are read from the plan itself.
type planIndex struct {
	p          *statefmt.ExecutionPlan
	pos        map[string]int
	dependents [][]int
	// open is a lower bound of the first step that is not completed, failed or blocked (those
	// statuses are final).
	open int
	// touched, when set, is told of every step the index changes.
	touched func(i int)
}

func (x *planIndex) touch(i int) {
	if x.touched != nil {
		x.touched(i)
	}
}

func indexPlan(p *statefmt.ExecutionPlan) *planIndex {
	x := &planIndex{p: p, pos: make(map[string]int, len(p.Steps)), dependents: make([][]int, len(p.Steps))}
	for i := range p.Steps {
		x.pos[p.Steps[i].ID] = i
	}
	for i := range p.Steps {
		for _, d := range p.Steps[i].Dependencies {
			if j, ok := x.pos[d]; ok {
				x.dependents[j] = append(x.dependents[j], i)
			}
		}
	}
	return x
}

// step is the index of the step with this id, or -1.
func (x *planIndex) step(id string) int {
	if i, ok := x.pos[id]; ok {
		return i
	}
	return -1
}

// refresh makes step i ready when it is pending and all its dependencies have completed.
func (x *planIndex) refresh(i int) bool {
	s := &x.p.Steps[i]
	if s.Status != statefmt.StepPending {
		return false
	}
	for _, d := range s.Dependencies {
		if j := x.step(d); j < 0 || x.p.Steps[j].Status != statefmt.StepCompleted {
			return false
		}
	}
	s.Status = statefmt.StepReady
	x.touch(i)
	return true
}

// refreshAll makes every pending step whose dependencies have all completed ready (on a plan
// just made or loaded).
func (x *planIndex) refreshAll() {
	for i := range x.p.Steps {
		x.refresh(i)
	}
}

// complete records a step's output, marks it completed, and makes ready the dependents it was
// the last to wait for.
func (x *planIndex) complete(id, output string) {
	i := x.step(id)
	s := &x.p.Steps[i]
	s.Status, s.Output, s.Error = statefmt.StepCompleted, &output, nil
	x.touch(i)
	for _, j := range x.dependents[i] {
		x.refresh(j)
	}
}

// fail records a step's error, marks it failed, and blocks every pending or ready step that
// depends on it, directly or through other steps; it returns the blocked ids in plan order.
func (x *planIndex) fail(id, msg string) []string {
	i := x.step(id)
	s := &x.p.Steps[i]
	s.Status, s.Error = statefmt.StepFailed, &msg
	x.touch(i)
	doomed := x.downstream([]int{i})
	order := make([]int, 0, len(doomed))
	for j := range doomed {
		if st := x.p.Steps[j].Status; j != i && (st == statefmt.StepPending || st == statefmt.StepReady) {
			order = append(order, j)
		}
	}
	slices.Sort(order)
	blocked := make([]string, 0, len(order))
	for _, j := range order {
		x.p.Steps[j].Status = statefmt.StepBlocked
		x.touch(j)
		blocked = append(blocked, x.p.Steps[j].ID)
	}
	return blocked
}

// downstream returns the steps that depend on any of roots, directly or through other steps
// (roots themselves only when one depends on another).
func (x *planIndex) downstream(roots []int) map[int]bool {
	out := map[int]bool{}
	for queue := roots; len(queue) > 0; queue = queue[1:] {
		for _, j := range x.dependents[queue[0]] {
			if !out[j] {
				out[j] = true
				queue = append(queue, j)
			}
		}
	}
	return out
}

// failedSteps are the indexes of the plan's failed steps.
func failedSteps(p *statefmt.ExecutionPlan) []int {
	var out []int
	for i, s := range p.Steps {
		if s.Status == statefmt.StepFailed {
			out = append(out, i)
		}
	}
	return out
}

// next returns the index of the first ready step in plan order, or -1.
func (x *planIndex) next() int {
	for x.open < len(x.p.Steps) && finished(x.p.Steps[x.open].Status) {
		x.open++
	}
	for i := x.open; i < len(x.p.Steps); i++ {
		if x.p.Steps[i].Status == statefmt.StepReady {
			return i
		}
	}
	return -1
}

// finished reports a final step status.
func finished(s statefmt.StepStatus) bool {
	return s == statefmt.StepCompleted || s == statefmt.StepFailed || s == statefmt.StepBlocked
}

// planDone says whether every step of the plan completed.
func planDone(p *statefmt.ExecutionPlan) bool {
	for _, s := range p.Steps {
		if s.Status != statefmt.StepCompleted {
			return false
		}
	}
	return true
}
