package task_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/task"
)

// validChange is the oracle: whether a change to current is one replan must accept. It is
// written from the rules, not from the validator: every step the change names exists and has
// not completed, is skipped at most once and not both skipped and replaced; every agent it
// names is the task's; inserted ids are new and distinct; the plan it makes has only known
// dependencies, none twice, and no cycle (a step depending on itself is one).
func validChange(current []task.CurrentStep, c *task.PlanChange, agents map[string]*task.Agent) bool {
	if len(c.Skip)+len(c.Replace)+len(c.Insert)+len(c.DependsOn) == 0 {
		return false
	}
	done := map[string]bool{}
	deps := map[string][]string{}
	for _, s := range current {
		done[s.ID] = s.Completed
		deps[s.ID] = s.DependsOn
	}
	changeable := func(id string) bool { d, ok := done[id]; return ok && !d }
	for i, id := range c.Skip {
		if !changeable(id) || slices.Contains(c.Skip[:i], id) {
			return false
		}
	}
	for id, ch := range c.Replace {
		if !changeable(id) || slices.Contains(c.Skip, id) {
			return false
		}
		if _, ok := agents[ch.Agent]; ch.Agent != "" && !ok {
			return false
		}
	}
	for id, d := range c.DependsOn {
		if !changeable(id) {
			return false
		}
		deps[id] = d
	}
	for _, n := range c.Insert {
		if _, ok := deps[n.ID]; ok {
			return false
		}
		if _, ok := agents[n.Agent]; !ok {
			return false
		}
		deps[n.ID] = n.DependsOn
	}
	for _, d := range deps {
		for i, x := range d {
			if _, ok := deps[x]; !ok || slices.Contains(d[:i], x) {
				return false
			}
		}
	}
	// No cycle: repeatedly remove steps whose dependencies are all removed.
	left := len(deps)
	gone := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for id, d := range deps {
			if gone[id] {
				continue
			}
			ok := true
			for _, x := range d {
				ok = ok && gone[x]
			}
			if ok {
				gone[id], progress = true, true
				left--
			}
		}
	}
	return left == 0
}

// randomChange makes a plan (1-6 steps, each depending on some earlier ones, some completed)
// and a change to it that names known and unknown steps and agents, and may make cycles.
func randomChange(r *rand.Rand) ([]task.CurrentStep, *task.PlanChange) {
	n := 1 + r.IntN(6)
	var current []task.CurrentStep
	var ids []string
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		var d []string
		for _, e := range ids {
			if r.IntN(3) == 0 {
				d = append(d, e)
			}
		}
		current = append(current, task.CurrentStep{PlanStep: task.PlanStep{ID: id, Description: "step " + id, Agent: "A", DependsOn: d}, Completed: r.IntN(3) == 0})
		ids = append(ids, id)
	}
	newIDs := []string{"n0", "n1"}
	pick := func(from []string) string { return from[r.IntN(len(from))] }
	some := func(from []string) []string {
		var out []string
		for _, x := range from {
			if r.IntN(4) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	known := append(slices.Clone(ids), "ghost")
	c := &task.PlanChange{}
	for range r.IntN(3) {
		c.Skip = append(c.Skip, pick(known))
	}
	if r.IntN(2) == 0 {
		c.Replace = map[string]task.StepChange{pick(known): {Description: "again", Agent: pick([]string{"", "A", "B", "Z"})}}
	}
	for i := range r.IntN(3) {
		id := newIDs[i%2]
		if r.IntN(5) == 0 {
			id = pick(ids)
		}
		c.Insert = append(c.Insert, task.NewStep{ID: id, Description: "new", Agent: pick([]string{"A", "B", "Z"}),
			DependsOn: some(append(slices.Clone(known), newIDs...))})
	}
	if r.IntN(2) == 0 {
		c.DependsOn = map[string][]string{pick(known): some(append(slices.Clone(ids), newIDs...))}
	}
	return current, c
}

// For random plan edits, validation accepts exactly the edits that keep the plan acyclic with
// known agents and steps (and change no completed step); what it accepts is the plan the
// change describes.
func TestPropertyPlanChangeValidation(t *testing.T) {
	agents := map[string]*task.Agent{"A": {Driver: "script"}, "B": {Driver: "script"}}
	p := proptest.Props(t, 500)
	accepted := 0
	p.Property("replan accepts exactly the valid changes", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, seed>>7))
			current, c := randomChange(r)
			data, err := json.Marshal(c)
			if err != nil {
				return err.Error()
			}
			got, steps, err := task.ParsePlanChange("change.json", data, current, agents)
			want := validChange(current, c, agents)
			if (err == nil) != want {
				return fmt.Sprintf("plan %+v\nchange %s\nvalid %v, validation says %v", current, data, want, err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "change.json") {
					return "an error without its file: " + err.Error()
				}
				return ""
			}
			accepted++
			if len(steps) != len(current)+len(got.Insert) {
				return fmt.Sprintf("%d steps after the change", len(steps))
			}
			for id, d := range c.DependsOn {
				if i := slices.IndexFunc(steps, func(s task.PlanStep) bool { return s.ID == id }); !slices.Equal(steps[i].DependsOn, d) {
					return fmt.Sprintf("step %s depends on %v, the change says %v", id, steps[i].DependsOn, d)
				}
			}
			return ""
		})
	}, gen.UInt64()))
	p.TestingRun(t)
	if accepted == 0 {
		t.Fatal("no generated change was valid: the property tested refusals only")
	}
	t.Logf("%d valid changes among the cases", accepted)
}

// A change's summary (the course event's message, part of the status reason) names at most ten
// items of each of its lists and counts the rest: skipped steps, replacements, inserts,
// dependency changes and the dependencies of one step. A small change is summed up in full.
func TestSummaryOfAHugeChangeNamesTenOfEachListAndCountsTheRest(t *testing.T) {
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%05d", prefix, i)
		}
		return out
	}
	c := &task.PlanChange{Skip: ids("k", 25), Replace: map[string]task.StepChange{}, DependsOn: map[string][]string{}}
	for _, id := range ids("r", 12) {
		c.Replace[id] = task.StepChange{Agent: "B"}
	}
	for i, id := range ids("n", 30000) {
		deps := []string{"b"}
		if i == 0 {
			deps = ids("d", 15)
		}
		c.Insert = append(c.Insert, task.NewStep{ID: id, Agent: "A", DependsOn: deps})
	}
	for _, id := range ids("w", 11) {
		c.DependsOn[id] = []string{"b"}
	}
	got := c.Summary()
	for _, want := range []string{
		"skip k00000, k00001, k00002, k00003, k00004, k00005, k00006, k00007, k00008, k00009 and 15 more; ",
		"replace r00009 (agent B) and 2 more replacements; ",
		"insert n00000 after [d00000,d00001,d00002,d00003,d00004,d00005,d00006,d00007,d00008,d00009 and 5 more]; insert n00001 after [b]; ",
		"insert n00009 after [b] and 29,990 more inserts; ",
		"w00009 depends on [b] and 1 more dependency change",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "n00010") || strings.Contains(got, "k00010") || strings.Contains(got, "r00010") || len(got) > 1200 {
		t.Fatalf("the summary (%d bytes) names more than ten of a list:\n%.2000s", len(got), got)
	}

	small := &task.PlanChange{Skip: []string{"ship"}, Replace: map[string]task.StepChange{"build": {Agent: "B"}},
		Insert: []task.NewStep{{ID: "check", Agent: "A", DependsOn: []string{"build"}}}, DependsOn: map[string][]string{"ship": {"check"}}}
	if got, want := small.Summary(), "skip ship; replace build (agent B); insert check after [build]; ship depends on [check]"; got != want {
		t.Fatalf("small change: %q, want %q", got, want)
	}
}
