package task

import (
	"encoding/json"
	"fmt"
	"slices"
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
}

// ReadOnly reports whether the harness holds its workspace only to read it.
func (w Workspace) ReadOnly() bool { return w.Shared == SharedReadOnly }

// CommitsSteps reports whether the runtime commits the workspace after each step.
func (w Workspace) CommitsSteps() bool { return w.Commit == CommitStep }

// onlyPath reports whether the workspace has no option besides its path (it is written back as
// a plain path, as task files without options always were).
func (w Workspace) onlyPath() bool { return w.Shared == "" && w.Commit == "" }

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
