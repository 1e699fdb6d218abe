package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// langGraph is LangGraph.js with its SQLite checkpointer, run by node from dir (langgraph/:
// run.mjs and its pinned packages, installed by `make bench-peers` when npm is there). It is
// not in-process: node's own clock and CPU usage measure the invoke alone, without node's
// start-up.
func langGraph(dir string, rounds int) (system, string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return system{}, "LangGraph.js + SqliteSaver: not run (node is not installed)"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-checkpoint-sqlite")); err != nil {
		return system{}, fmt.Sprintf("LangGraph.js + SqliteSaver: not run (its packages are not installed: `npm ci` in %s)", dir)
	}
	script := filepath.Join(dir, "run.mjs")
	return system{Name: "LangGraph.js + SqliteSaver", Rounds: rounds, Durability: `durability "sync"; SQLite WAL, synchronous=NORMAL (better-sqlite3's default)`,
		Note: "a one-node graph looping N times, each step appending its chunk to the state's outputs, checkpointed by SqliteSaver; " +
			"run by node in its own process, timed by node around invoke()",
		run: func(ctx context.Context, w *workload, d string, _ bool) (run, error) {
			r := run{Fsyncs: -1}
			db := filepath.Join(d, "langgraph", "checkpoints.sqlite")
			if err := mkdirAll(filepath.Dir(db)); err != nil {
				return r, err
			}
			spec, _ := json.Marshal(map[string]any{"workspace": w.Workspace, "chunks": w.Chunks, "db": db})
			specFile := filepath.Join(d, "spec.json")
			if err := os.WriteFile(specFile, spec, 0o600); err != nil {
				return r, err
			}
			cmd := exec.CommandContext(ctx, node, script, specFile)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				return r, fmt.Errorf("node %s: %v: %s", script, err, stderr.String())
			}
			var out struct {
				ElapsedMs, CPUMs float64
				Synchronous      int
				JournalMode      string
				Outputs          []string
			}
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				return r, fmt.Errorf("node %s: %v", script, err)
			}
			if out.Synchronous != 1 || out.JournalMode != "wal" {
				return r, fmt.Errorf("LangGraph's SQLite runs at synchronous=%d, journal_mode=%s: the report says 1 (NORMAL) and wal", out.Synchronous, out.JournalMode)
			}
			r.Elapsed = time.Duration(out.ElapsedMs * 1e6)
			r.CPU = time.Duration(out.CPUMs * 1e6)
			r.Outputs = out.Outputs
			var err error
			r.Bytes, err = dirBytes(filepath.Dir(db))
			return r, err
		}}, ""
}
