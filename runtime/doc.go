// Package runtime runs tasks: the Manager creates, finds, lists, runs, stops and resumes
// harnesses over a store.Store; a Harness runs its plan step by step through its agents'
// drivers, checkpointing after every step and transition, and emits events to sinks. The direct
// path (RunDirect) runs a task's agents with no harness. Task files are read by runtime/task.
// See docs/runtime.md.
package runtime
