package task

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/harness-edge/harness-edge/internal/idlist"
)

// PlanChange is a change to the plan of a harness that has started (`harness-edge replan`):
// steps skipped, steps replaced, steps inserted, dependencies changed. It is written in YAML
// (JSON accepted) and checked as a whole: every problem is reported, with its line, and a change
// with any problem changes nothing.
type PlanChange struct {
	// Skip lists steps to mark completed without running them.
	Skip []string `yaml:"skip" json:"skip,omitzero"`
	// Replace changes steps: their description (the agent's prompt for the step), agent,
	// critical flag or script actions.
	Replace map[string]StepChange `yaml:"replace" json:"replace,omitzero"`
	// Insert adds steps at the end of the plan (their dependencies order them).
	Insert []NewStep `yaml:"insert" json:"insert,omitzero"`
	// DependsOn replaces the dependencies of steps.
	DependsOn map[string][]string `yaml:"dependsOn" json:"dependsOn,omitzero"`
}

// StepChange is what a replan changes of one step; what is not written stays.
type StepChange struct {
	Description string   `yaml:"description" json:"description,omitzero"`
	Agent       string   `yaml:"agent" json:"agent,omitzero"`
	Critical    *bool    `yaml:"critical" json:"critical,omitzero"`
	Actions     []Action `yaml:"actions" json:"actions,omitzero"`
}

// NewStep is a step a replan inserts; Actions are its script actions (for a script agent).
type NewStep struct {
	ID          string   `yaml:"id" json:"id"`
	Description string   `yaml:"description" json:"description"`
	Agent       string   `yaml:"agent" json:"agent"`
	DependsOn   []string `yaml:"dependsOn" json:"dependsOn,omitzero"`
	Critical    bool     `yaml:"critical" json:"critical,omitzero"`
	Actions     []Action `yaml:"actions" json:"actions,omitzero"`
}

// CurrentStep is a step of the plan a change applies to: its definition and whether it has
// completed (a completed step cannot be changed).
type CurrentStep struct {
	PlanStep
	Completed bool
}

// ParsePlanChange reads a plan change (name is used in errors) and checks it against the
// current plan and the task's agents: the steps it names exist and have not completed, the
// agents it names exist (and are script agents where it gives actions), the ids it inserts are
// new, and the plan it makes is valid (known dependencies, no cycle). It returns the change
// and the plan after it (the current steps in order, changed, then the inserted ones). Every
// problem is reported at once, each with its line and field. A change over MaxFileSize is
// refused: it may be as large as a task file, no larger.
func ParsePlanChange(name string, data []byte, current []CurrentStep, agents map[string]*Agent) (*PlanChange, []PlanStep, error) {
	if len(data) > MaxFileSize {
		return nil, nil, SizeError(name, "plan change", int64(len(data)))
	}
	c := &PlanChange{}
	root, errs, err := decodeDoc(name, data, reflect.ValueOf(c).Elem(), "the plan change")
	if err != nil {
		return nil, nil, err
	}
	if len(errs) > 0 {
		return nil, nil, joinErrs(name, errs)
	}
	var fes []fieldErr
	bad := func(msg string, path ...string) { fes = append(fes, fieldErr{path, msg}) }
	if len(c.Skip)+len(c.Replace)+len(c.Insert)+len(c.DependsOn) == 0 {
		bad("the change changes nothing: write skip, replace, insert or dependsOn")
	}
	index := map[string]int{}
	for i, s := range current {
		index[s.ID] = i
	}
	// changeable checks a step the change names: it exists and has not completed.
	changeable := func(id string, path ...string) bool {
		i, ok := index[id]
		switch {
		case !ok:
			bad(fmt.Sprintf("%q is not a step of the plan", id), path...)
		case current[i].Completed:
			bad(fmt.Sprintf("step %s has completed: it cannot be changed", id), path...)
		default:
			return true
		}
		return false
	}
	knownAgent := func(a string) bool { _, ok := agents[a]; return ok }
	checkActions := func(agent string, actions []Action, path ...string) {
		if len(actions) == 0 {
			return
		}
		if a := agents[agent]; a != nil && a.Driver != "script" {
			bad(fmt.Sprintf("actions are for script agents; %s is a %s agent", agent, a.Driver), append(path, "actions")...)
		}
		for i, act := range actions {
			fes = append(fes, validateAction(act, append(slices.Clone(path), "actions", fmt.Sprintf("[%d]", i)))...)
		}
	}
	skipped := map[string]bool{}
	for i, id := range c.Skip {
		p := []string{"skip", fmt.Sprintf("[%d]", i)}
		if skipped[id] {
			bad(fmt.Sprintf("%q is listed twice", id), p...)
			continue
		}
		skipped[id] = true
		changeable(id, p...)
	}
	steps := make([]PlanStep, len(current))
	for i, s := range current {
		steps[i] = s.PlanStep
		steps[i].DependsOn = slices.Clone(s.DependsOn)
	}
	for _, id := range sortedKeys(c.Replace) {
		ch, p := c.Replace[id], []string{"replace", id}
		if !changeable(id, p...) {
			continue
		}
		if skipped[id] {
			bad(fmt.Sprintf("step %s is skipped too: skip it or replace it", id), p...)
		}
		if ch.Description == "" && ch.Agent == "" && ch.Critical == nil && len(ch.Actions) == 0 {
			bad("changes nothing: write description, agent, critical or actions", p...)
		}
		s := &steps[index[id]]
		if ch.Description != "" {
			s.Description = ch.Description
		}
		if ch.Agent != "" {
			if !knownAgent(ch.Agent) {
				bad(fmt.Sprintf("%q is not an agent of the task %v", ch.Agent, sortedKeys(agents)), append(p, "agent")...)
			}
			s.Agent = ch.Agent
		}
		if ch.Critical != nil {
			s.Critical = *ch.Critical
		}
		checkActions(s.Agent, ch.Actions, p...)
	}
	for _, id := range sortedKeys(c.DependsOn) {
		if changeable(id, "dependsOn", id) {
			steps[index[id]].DependsOn = slices.Clone(c.DependsOn[id])
		}
	}
	for i, n := range c.Insert {
		p := []string{"insert", fmt.Sprintf("[%d]", i)}
		if _, ok := index[n.ID]; ok {
			bad(fmt.Sprintf("%q is already a step of the plan: insert new steps, replace existing ones", n.ID), append(p, "id")...)
		}
		steps = append(steps, PlanStep{ID: n.ID, Description: n.Description, Agent: n.Agent, DependsOn: slices.Clone(n.DependsOn), Critical: n.Critical})
		if knownAgent(n.Agent) {
			checkActions(n.Agent, n.Actions, p...)
		}
	}
	// The plan the change makes, checked as a task's plan is. A problem of an inserted step is
	// the insert's; one of an existing step is where the change touched it.
	for _, e := range CheckPlan(steps, knownAgent) {
		path := []string{}
		switch {
		case e.Step >= len(current):
			if _, dup := index[steps[e.Step].ID]; dup && e.Field == "id" {
				continue // reported above
			}
			path = append(path, "insert", fmt.Sprintf("[%d]", e.Step-len(current)))
			if e.Field != "" {
				path = append(path, e.Field)
			}
		case e.Step >= 0:
			id := current[e.Step].ID
			switch _, dep := c.DependsOn[id]; {
			case dep:
				path = append(path, "dependsOn", id)
			case c.Replace[id].Agent != "" && e.Field == "agent":
				continue // reported above
			default:
				path = append(path, "plan")
				e.Msg = fmt.Sprintf("step %s: %s: %s", id, e.Field, e.Msg)
			}
		}
		fes = append(fes, fieldErr{path, e.Msg})
	}
	if len(fes) > 0 {
		for _, fe := range fes {
			errs = append(errs, lineErr{fe, locate(root, fe.path), false})
		}
		return nil, nil, joinErrs(name, dedupe(errs))
	}
	return c, steps, nil
}

// dedupe drops a problem reported twice at the same place.
func dedupe(errs []lineErr) []lineErr {
	seen := map[string]bool{}
	out := errs[:0]
	for _, e := range errs {
		k := fmt.Sprintf("%d\x00%s\x00%s", e.line, e.field(), e.msg)
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// decodeDoc parses data as one YAML (or JSON) document about `what` and decodes it into v,
// as decodeFile does for a task file.
func decodeDoc(name string, data []byte, v reflect.Value, what string) (*yaml.Node, []lineErr, error) {
	data, err := DecodeText(name, strings.TrimPrefix(what, "the "), data)
	if err != nil {
		return nil, nil, err
	}
	data = lineFeeds(data)
	if data, err = jsonSurrogates(name, data); err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, &Error{File: name, Msg: what + " is empty"}
	}
	root, err := readDocument(name, data, what+" is empty", "a second YAML document: "+what+" is one")
	if err != nil {
		return nil, nil, err
	}
	d := &decoder{maxNodes: max(minNodes, 4*len(data))}
	d.value(root, v, nil, 0)
	return root, d.errs, nil
}

// Summary says in a few words what a change does ("skip ship; replace build (agent B)"). It is
// the course event's message and part of the status reason, so each of its lists (skipped
// steps, replacements, inserts, dependency changes, a step's dependencies) names at most
// idlist.Max items and counts the rest: a change that inserts 30,000 steps is summed up in a
// line, not in 750 KB.
func (c *PlanChange) Summary() string {
	var parts []string
	if len(c.Skip) > 0 {
		parts = append(parts, "skip "+idlist.Join(c.Skip, ", "))
	}
	var replaced []string
	for _, id := range sortedKeys(c.Replace) {
		ch := c.Replace[id]
		var what []string
		if ch.Description != "" {
			what = append(what, "description")
		}
		if ch.Agent != "" {
			what = append(what, "agent "+ch.Agent)
		}
		if ch.Critical != nil {
			what = append(what, fmt.Sprintf("critical %v", *ch.Critical))
		}
		if len(ch.Actions) > 0 {
			what = append(what, fmt.Sprintf("%d actions", len(ch.Actions)))
		}
		replaced = append(replaced, fmt.Sprintf("replace %s (%s)", id, strings.Join(what, ", ")))
	}
	if len(replaced) > 0 {
		parts = append(parts, idlist.JoinMore(replaced, "; ", "replacement"))
	}
	var inserted []string
	for _, n := range c.Insert {
		inserted = append(inserted, fmt.Sprintf("insert %s after [%s]", n.ID, idlist.Join(n.DependsOn, ",")))
	}
	if len(inserted) > 0 {
		parts = append(parts, idlist.JoinMore(inserted, "; ", "insert"))
	}
	var rewired []string
	for _, id := range sortedKeys(c.DependsOn) {
		rewired = append(rewired, fmt.Sprintf("%s depends on [%s]", id, idlist.Join(c.DependsOn[id], ",")))
	}
	if len(rewired) > 0 {
		parts = append(parts, idlist.JoinMore(rewired, "; ", "dependency change"))
	}
	return strings.Join(parts, "; ")
}
