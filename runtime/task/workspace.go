package task

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
)

// Workspace sharing modes (Workspace.Shared).
const (
	// SharedExclusive: one harness at a time holds the workspace (the default).
	SharedExclusive = "exclusive"
	// SharedReadOnly: harnesses that only read may hold the workspace together; a harness that
	// writes waits for them (and they for it).
	SharedReadOnly = "read-only"
)

// CommitStep commits the workspace (a git work tree) after every completed step
// (Workspace.Commit).
const CommitStep = "step"

// WriteTools are the built-in tools that change the workspace: an agent of a task that shares
// its workspace read-only may not list them.
var WriteTools = []string{"write_file", "edit_file", "git_commit"}

// Workspace is where the agents' tools work. A task file writes it as a path
// (`workspace: ./work`) or as a mapping with the options:
//
//	workspace: {path: ./work, shared: read-only}
//	workspace: {path: ./repo, commit: step}
type Workspace struct {
	// Path is the directory (relative paths are relative to the task file).
	Path string `yaml:"path" json:"path,omitzero"`
	// Shared is how harnesses share it: exclusive (the default) or read-only.
	Shared string `yaml:"shared" json:"shared,omitzero"`
	// Commit "step" commits the workspace's git work tree after each completed step.
	Commit string `yaml:"commit" json:"commit,omitzero"`
	// Repo with Isolate "worktree": each harness works in its own git worktree of this
	// repository, on a branch named after it, made from Ref (default: the repository's HEAD).
	// Path is then the worktree's directory, set when the harness is created.
	Repo    string `yaml:"repo" json:"repo,omitzero"`
	Isolate string `yaml:"isolate" json:"isolate,omitzero"`
	Ref     string `yaml:"ref" json:"ref,omitzero"`
	// Merge "fast-forward" fast-forwards the repository's checked-out branch to the harness's
	// branch when the harness completes (when it can; otherwise the branch waits for review).
	Merge string `yaml:"merge" json:"merge,omitzero"`
	// SubAgents "worktree" (with Isolate "worktree" and Commit "step") gives each sub-agent a
	// worktree of its own too, on its own branch made from its parent's branch; when the
	// sub-agent completes, its branch is fast-forwarded into its parent's worktree. Default:
	// sub-agents work in their parent's worktree.
	SubAgents string `yaml:"subAgents" json:"subAgents,omitzero"`
}

// IsolateWorktree gives each harness its own git worktree (Workspace.Isolate).
const IsolateWorktree = "worktree"

// MergeFastForward merges a completed harness's branch by fast-forward (Workspace.Merge).
const MergeFastForward = "fast-forward"

// SubAgentsWorktree gives each sub-agent a worktree of its own (Workspace.SubAgents).
const SubAgentsWorktree = "worktree"

// SubAgentWorktrees reports whether each sub-agent works in a worktree of its own.
func (w Workspace) SubAgentWorktrees() bool { return w.SubAgents == SubAgentsWorktree }

// Isolated reports whether each harness works in a worktree of its own.
func (w Workspace) Isolated() bool { return w.Isolate == IsolateWorktree }

// refPattern is what a ref may look like (never an option).
var refPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]*$`) })

// ReadOnly reports whether the harness holds its workspace only to read it.
func (w Workspace) ReadOnly() bool { return w.Shared == SharedReadOnly }

// CommitsSteps reports whether the runtime commits the workspace after each step.
func (w Workspace) CommitsSteps() bool { return w.Commit == CommitStep }

// onlyPath reports whether the workspace has no option besides its path (it is written back as
// a plain path, as task files without options always were).
func (w Workspace) onlyPath() bool {
	return w.Shared == "" && w.Commit == "" && w.Repo == "" && w.Isolate == "" && w.Ref == "" && w.Merge == "" && w.SubAgents == ""
}

// MarshalJSON writes a workspace without options as its path, and one with options as an object.
func (w Workspace) MarshalJSON() ([]byte, error) {
	if w.onlyPath() {
		return json.Marshal(w.Path)
	}
	type plain Workspace
	return json.Marshal(plain(w))
}

// UnmarshalJSON reads either form (the YAML decoder reads task files; this is for JSON readers).
func (w *Workspace) UnmarshalJSON(b []byte) error {
	var path string
	if err := json.Unmarshal(b, &path); err == nil {
		*w = Workspace{Path: path}
		return nil
	}
	type plain Workspace
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("workspace: want a path or {path, shared, commit}: %w", err)
	}
	*w = Workspace(p)
	return nil
}

// StoredWorkspace reads only the workspace of a task the runtime stored with its harness (the
// task as JSON, written by the runtime), as Parse would give it, without decoding the rest:
// deleting thousands of harnesses asks each only where its worktree is. ok is false when data
// is not such JSON; Parse then reads it whole.
func StoredWorkspace(data []byte) (w Workspace, ok bool) {
	var doc struct {
		Workspace *Workspace `json:"workspace"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return Workspace{}, false
	}
	if doc.Workspace != nil {
		w = *doc.Workspace
	}
	w.applyDefaults()
	return w, true
}

// applyDefaults gives a workspace without a path (and not isolated: a worktree's path is the
// harness's) the default one.
func (w *Workspace) applyDefaults() {
	if w.Path == "" && !w.Isolated() {
		w.Path = DefaultWorkspace
	}
}

// validateWorkspace checks the workspace's options, and that agents of a read-only workspace
// list no tool that writes.
func (t *Task) validateWorkspace() []fieldErr {
	var errs []fieldErr
	w := t.Workspace
	if !slices.Contains([]string{"", SharedExclusive, SharedReadOnly}, w.Shared) {
		errs = append(errs, fieldErr{[]string{"workspace", "shared"}, fmt.Sprintf("%q is not %s or %s", w.Shared, SharedExclusive, SharedReadOnly)})
	}
	if w.Commit != "" && w.Commit != CommitStep {
		errs = append(errs, fieldErr{[]string{"workspace", "commit"}, fmt.Sprintf("%q is not %s (commit the workspace after each completed step)", w.Commit, CommitStep)})
	}
	if w.ReadOnly() && w.CommitsSteps() {
		errs = append(errs, fieldErr{[]string{"workspace", "commit"}, "a workspace shared read-only cannot be committed to: drop commit, or shared"})
	}
	bad := func(msg string, field string) { errs = append(errs, fieldErr{[]string{"workspace", field}, msg}) }
	switch {
	case w.Isolate != "" && w.Isolate != IsolateWorktree:
		bad(fmt.Sprintf("%q is not %s", w.Isolate, IsolateWorktree), "isolate")
	case w.Isolated() && w.Repo == "":
		bad("isolate: worktree needs repo: the repository whose worktrees the harnesses work in", "repo")
	case !w.Isolated() && w.Repo != "":
		bad("repo is the repository of isolate: worktree: add it, or name the workspace with path", "repo")
	case w.Isolated() && w.Path != "":
		bad("with isolate: worktree each harness works in its own worktree of repo: drop path", "path")
	case w.Isolated() && w.ReadOnly():
		bad("each harness has a worktree of its own: there is nothing to share", "shared")
	case w.Isolated() && t.LongRunning != nil && !*t.LongRunning:
		bad("isolate: worktree needs a harness (the worktree and its branch are named after it): drop longRunning: false", "isolate")
	}
	if w.Ref != "" && !w.Isolated() {
		bad("ref is where isolate: worktree branches from", "ref")
	} else if w.Ref != "" && !refPattern().MatchString(w.Ref) {
		bad(fmt.Sprintf("%q is not a ref (letters, digits and ./~^@{}+-, not starting with '-')", w.Ref), "ref")
	}
	if w.Merge != "" && w.Merge != MergeFastForward {
		bad(fmt.Sprintf("%q is not %s", w.Merge, MergeFastForward), "merge")
	} else if w.Merge != "" && !w.Isolated() {
		bad("merge applies to the branch of isolate: worktree", "merge")
	}
	switch {
	case w.SubAgents != "" && w.SubAgents != SubAgentsWorktree:
		bad(fmt.Sprintf("%q is not %s", w.SubAgents, SubAgentsWorktree), "subAgents")
	case w.SubAgentWorktrees() && !w.Isolated():
		bad("subAgents: worktree branches each sub-agent from its parent's branch: add isolate: worktree (and repo)", "subAgents")
	case w.SubAgentWorktrees() && !w.CommitsSteps():
		bad("subAgents: worktree needs commit: step: a sub-agent starts from its parent's last commit and hands its work back as commits", "subAgents")
	}
	if !w.ReadOnly() {
		return errs
	}
	for _, name := range sortedKeys(t.Agents) {
		a := t.Agents[name]
		if a == nil {
			continue
		}
		for i, tool := range a.Tools {
			if slices.Contains(WriteTools, tool) {
				errs = append(errs, fieldErr{[]string{"agents", name, "tools", fmt.Sprintf("[%d]", i)},
					fmt.Sprintf("%s writes to the workspace, which the task shares read-only (workspace.shared)", tool)})
			}
		}
	}
	return errs
}
