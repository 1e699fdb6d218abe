package main

import (
	"path/filepath"
	"runtime"
	"testing"
)

// The peers read their chunks with workload.read; harness-edge reads them with read_file. Both
// must give the outputs the workload expects, and the same seed the same chunks.
func TestWorkloadDeterministicAndReadable(t *testing.T) {
	src := filepath.Join(runtime.GOROOT(), "src")
	a, err := newWorkload(src, t.TempDir(), 40, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newWorkload(src, t.TempDir(), 40, 7)
	if err != nil {
		t.Fatal(err)
	}
	if digest(a.Want) != digest(b.Want) {
		t.Fatal("the same seed chose different text")
	}
	for i, c := range a.Chunks {
		if c.Limit < 20 || c.Limit > 60 {
			t.Errorf("step %d reads %d lines, want 20-60", i, c.Limit)
		}
		got, err := a.read(c)
		if err != nil {
			t.Fatal(err)
		}
		if got != a.Want[i] {
			t.Errorf("step %d: read %q..., want %q...", i, got[:min(40, len(got))], a.Want[i][:min(40, len(a.Want[i]))])
		}
	}
}
