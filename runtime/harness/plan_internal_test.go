package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Any sequence of requested transitions: the allowed ones (the lifecycle, written
// out again here) succeed and land on the target; the others fail, naming both statuses, and
// change nothing.
func TestPropertyLifecycle(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	allowed := map[[2]statefmt.Status]bool{
		{"created", "running"}: true, {"running", "paused"}: true, {"running", "completed"}: true,
		{"running", "failed"}: true, {"paused", "running"}: true, {"paused", "failed"}: true,
	}
	p := proptest.Props(t, 200)
	p.Property("transitions follow the table; refused ones change nothing", prop.ForAll(func(ops []int) bool {
		return proptest.Report(t, func() string {
			s := &statefmt.HarnessState{HarnessID: "h", Status: statefmt.StatusCreated}
			now := time.Unix(0, 0)
			for _, op := range ops {
				to := statefmt.Statuses[op]
				before := *s
				now = now.Add(time.Second)
				ev, err := transition(s, to, "why", now)
				if allowed[[2]statefmt.Status{before.Status, to}] {
					if err != nil || s.Status != to || ev.From != before.Status || ev.To != to || !s.UpdatedAt.Equal(now) {
						return fmt.Sprintf("%s -> %s: %v", before.Status, to, err)
					}
					continue
				}
				var te *TransitionError
				if err == nil || !errors.As(err, &te) || te.From != before.Status || te.To != to {
					return fmt.Sprintf("%s -> %s accepted or wrong error: %v", before.Status, to, err)
				}
				if s.Status != before.Status || s.StatusReason != before.StatusReason || !s.UpdatedAt.Equal(before.UpdatedAt) {
					return fmt.Sprintf("refused %s -> %s changed the state", before.Status, to)
				}
			}
			return ""
		})
	}, gen.SliceOf(gen.IntRange(0, len(statefmt.Statuses)-1))))
	p.TestingRun(t)
}

// RandomDAG: n steps, each depending on a random subset of the earlier ones.
func randomDAG(r *rand.Rand, n int) []task.PlanStep {
	steps := make([]task.PlanStep, n)
	for i := range steps {
		steps[i] = task.PlanStep{ID: fmt.Sprintf("s%d", i), Description: "step", Agent: "A"}
		for j := range i {
			if r.IntN(3) == 0 {
				steps[i].DependsOn = append(steps[i].DependsOn, fmt.Sprintf("s%d", j))
			}
		}
	}
	r.Shuffle(n, func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	return steps
}

// Reference computes every step's status from scratch, from which steps completed and failed.
func reference(steps []task.PlanStep, completed, failed map[string]bool) map[string]statefmt.StepStatus {
	deps := map[string][]string{}
	for _, s := range steps {
		deps[s.ID] = s.DependsOn
	}
	var failedAbove func(id string) bool
	failedAbove = func(id string) bool {
		for _, d := range deps[id] {
			if failed[d] || failedAbove(d) {
				return true
			}
		}
		return false
	}
	out := map[string]statefmt.StepStatus{}
	for _, s := range steps {
		switch {
		case completed[s.ID]:
			out[s.ID] = statefmt.StepCompleted
		case failed[s.ID]:
			out[s.ID] = statefmt.StepFailed
		case failedAbove(s.ID):
			out[s.ID] = statefmt.StepBlocked
		default:
			out[s.ID] = statefmt.StepReady
			for _, d := range s.DependsOn {
				if !completed[d] {
					out[s.ID] = statefmt.StepPending
				}
			}
		}
	}
	return out
}

// Over random DAGs and random completions and failures of ready steps, every
// step's status matches the reference computation after every event; step failures block
// exactly the transitive dependents; the plan is done exactly when all steps completed.
func TestPropertyDependencyResolution(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 200)
	p.Property("readiness and blocking match the reference", prop.ForAll(func(seed uint64, n int) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 7))
			steps := randomDAG(r, n)
			plan, err := newPlan("t", steps, func(string) bool { return true }, time.Unix(0, 0))
			if err != nil {
				return err.Error()
			}
			completed, failed := map[string]bool{}, map[string]bool{}
			check := func() string {
				want := reference(steps, completed, failed)
				for _, s := range plan.Steps {
					if s.Status != want[s.ID] {
						return fmt.Sprintf("step %s is %s, the reference says %s", s.ID, s.Status, want[s.ID])
					}
				}
				return ""
			}
			if msg := check(); msg != "" {
				return msg
			}
			x := indexPlan(plan)
			for i := x.next(); i >= 0; i = x.next() {
				id := plan.Steps[i].ID
				if r.IntN(5) == 0 {
					before := reference(steps, completed, failed)
					failed[id] = true
					blocked := x.fail(id, "boom")
					after := reference(steps, completed, failed)
					var want []string
					for _, s := range plan.Steps {
						if after[s.ID] == statefmt.StepBlocked && before[s.ID] != statefmt.StepBlocked {
							want = append(want, s.ID)
						}
					}
					if !slices.Equal(blocked, want) {
						return fmt.Sprintf("failing %s blocked %v, want %v", id, blocked, want)
					}
				} else {
					completed[id] = true
					x.complete(id, "ok")
				}
				if msg := check(); msg != "" {
					return msg
				}
			}
			done := planDone(plan)
			if done != (len(completed) == len(steps)) {
				return fmt.Sprintf("done=%v with %d of %d completed", done, len(completed), len(steps))
			}
			return ""
		})
	}, gen.UInt64(), gen.IntRange(1, 12)))
	p.TestingRun(t)
}

// HasCycle is an independent check (Kahn's algorithm).
func hasCycle(steps []task.PlanStep) bool {
	indeg := map[string]int{}
	users := map[string][]string{}
	for _, s := range steps {
		indeg[s.ID] += 0
		for _, d := range s.DependsOn {
			indeg[s.ID]++
			users[d] = append(users[d], s.ID)
		}
	}
	var queue []string
	for id, n := range indeg {
		if n == 0 {
			queue = append(queue, id)
		}
	}
	seen := 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		seen++
		for _, u := range users[id] {
			if indeg[u]--; indeg[u] == 0 {
				queue = append(queue, u)
			}
		}
	}
	return seen != len(steps)
}

// Plan validation over random graphs (edges in any direction, sometimes unknown dependencies or
// agents, duplicate ids): newPlan refuses exactly the invalid ones, with a message naming the
// problem.
func TestPropertyPlanValidation(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 200)
	p.Property("newPlan refuses exactly the invalid plans", prop.ForAll(func(seed uint64, n int) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 9))
			steps := make([]task.PlanStep, n)
			for i := range steps {
				steps[i] = task.PlanStep{ID: fmt.Sprintf("s%d", i), Description: "d", Agent: "A"}
				for j := range n {
					if j != i && r.IntN(n+2) == 0 {
						steps[i].DependsOn = append(steps[i].DependsOn, fmt.Sprintf("s%d", j))
					}
				}
			}
			unknownDep, unknownAgent, dup := r.IntN(8) == 0, r.IntN(8) == 0, n > 1 && r.IntN(8) == 0
			if unknownDep {
				steps[r.IntN(n)].DependsOn = append(steps[r.IntN(n)].DependsOn, "nowhere")
			}
			if unknownAgent {
				steps[r.IntN(n)].Agent = "Z"
			}
			if dup {
				steps[n-1].ID = steps[0].ID
			}
			_, err := newPlan("t", steps, func(a string) bool { return a == "A" }, time.Unix(0, 0))
			invalid := unknownDep || unknownAgent || dup || hasCycle(steps)
			switch {
			case invalid && err == nil:
				return "an invalid plan was accepted"
			case !invalid && err != nil:
				return "a valid plan was refused: " + err.Error()
			case !unknownDep && !unknownAgent && !dup && invalid && !contains(err.Error(), "dependency cycle"):
				return "a cycle was reported as: " + err.Error()
			}
			return ""
		})
	}, gen.UInt64(), gen.IntRange(1, 10)))
	p.TestingRun(t)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Report turns a property's failure message into its verdict, logging the message.

// BenchmarkPlanStep is the plan's part of one step (find the next ready step, complete it,
// make its dependents ready) in a chain of n steps, each depending on the one before: it must
// not grow with n.
func BenchmarkPlanStep(b *testing.B) {
	for _, n := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			steps := make([]task.PlanStep, n)
			for i := range steps {
				steps[i] = task.PlanStep{ID: fmt.Sprintf("s%d", i), Description: "d", Agent: "A"}
				if i > 0 {
					steps[i].DependsOn = []string{steps[i-1].ID}
				}
			}
			b.ResetTimer()
			done := 0
			for b.Loop() {
				if done%n == 0 {
					b.StopTimer()
					p, err := newPlan("t", steps, func(string) bool { return true }, time.Unix(0, 0))
					if err != nil {
						b.Fatal(err)
					}
					x := indexPlan(p)
					b.StartTimer()
					benchPlan = x
				}
				i := benchPlan.next()
				benchPlan.complete(benchPlan.p.Steps[i].ID, "ok")
				done++
			}
		})
	}
}

var benchPlan *planIndex
