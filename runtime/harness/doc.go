// Package harness is the harness core: the Manager creates, finds, lists, runs, stops and
// resumes harnesses over a Store; a Harness runs its plan step by step through its agents'
// drivers (runtime/agent, runtime/driver/...) and the tool pipeline (runtime/tools),
// checkpointing after every step and transition, and hands its events to sinks once they are
// durable. The direct path (RunDirect) runs a task's agents with no harness. See
// docs/runtime.md and ARCHITECTURE.md.
package harness
