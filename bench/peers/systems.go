package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/harness-edge/harness-edge/internal/syncfs"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS's SQLite system database (modernc.org/sqlite)

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// A run is one system doing the whole workload once in a fresh directory.
type run struct {
	Elapsed time.Duration // the N steps, from the first to the last one durable
	CPU     time.Duration // process CPU (user + system) over the same window
	Fsyncs  int64         // -1: not counted
	Bytes   int64         // every file in the system's directory after it closed
	Outputs []string      // read back from disk after the run
}

// A system is a way to make each step of the workload durable. counted asks it to count its
// fsyncs (a separate round: counting changes how some systems open their files).
type system struct {
	Name       string `json:"name"`
	Durability string `json:"durability"`
	Note       string `json:"note,omitempty"`
	CanCount   bool   `json:"-"`
	// Rounds caps the system's timed rounds (0: as many as the others).
	Rounds int `json:"rounds,omitempty"`
	run    func(ctx context.Context, w *workload, dir string, counted bool) (run, error)
}

var systems = []system{
	{Name: "harness-edge", Durability: "every checkpoint in a pebble.Sync batch; the next read runs while it syncs, and the step is announced once it is durable",
		Note: "a script-driver task run by runtime/harness: read_file tool calls, events, index, delta checkpoints", CanCount: true, run: runHarnessEdge},
	{Name: "bare Pebble", Durability: "one pebble.Sync batch per step", Note: "the floor: the step's output under one key, nothing else", CanCount: true, run: runBarePebble},
	{Name: "DBOS-Go, SQLite FULL", Durability: "SQLite WAL, synchronous=FULL (fsync per commit)",
		Note: "DBOS's own pool settings (WAL, busy_timeout, foreign keys, immediate transactions) with synchronous=FULL", run: dbosRunner(true)},
	{Name: "DBOS-Go, SQLite NORMAL", Durability: "SQLite WAL, synchronous=NORMAL (DBOS's default: survives a process crash; the last commits can be lost on power loss)",
		Note: "DBOS as configured by a sqlite: URL", run: dbosRunner(false)},
}

// measure runs f between two readings of the clock and of the process's CPU time.
func measure(f func() error) (time.Duration, time.Duration, error) {
	c0, t0 := cpuTime(), time.Now()
	err := f()
	return time.Since(t0), cpuTime() - c0, err
}

// harnessTask is the workload as a task file: one plan step per chunk, each depending on the
// one before, each a read_file call whose output is the step's output.
func harnessTask(w *workload) ([]byte, []string) {
	type action struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
	type step struct {
		ID          string   `json:"id"`
		Description string   `json:"description"`
		Agent       string   `json:"agent"`
		DependsOn   []string `json:"dependsOn,omitempty"`
	}
	steps := map[string][]action{}
	var plan []step
	var ids []string
	for i, c := range w.Chunks {
		id := fmt.Sprintf("s%05d", i+1)
		steps[id] = []action{{Tool: "read_file", Args: map[string]any{"path": c.Path, "offset": c.Offset, "limit": c.Limit}}}
		s := step{ID: id, Description: "read " + c.Path, Agent: "A"}
		if i > 0 {
			s.DependsOn = []string{ids[i-1]}
		}
		plan = append(plan, s)
		ids = append(ids, id)
	}
	b, _ := json.Marshal(map[string]any{
		"id": "peers", "agent": "A", "autonomy": 5, "workspace": w.Workspace,
		"budget": map[string]any{"toolCalls": len(w.Chunks)},
		"agents": map[string]any{"A": map[string]any{"driver": "script", "tools": []string{"read_file"},
			"script": map[string]any{"steps": steps}}},
		"plan": plan,
	})
	return b, ids
}

func runHarnessEdge(ctx context.Context, w *workload, dir string, counted bool) (run, error) {
	r := run{Fsyncs: -1}
	src, ids := harnessTask(w)
	t, err := task.ParseAt("peers.json", src, dir)
	if err != nil {
		return r, err
	}
	var o store.StoreOptions
	var fs *syncfs.FS
	if counted {
		fs = syncfs.New()
		o.FS = fs
	}
	db := filepath.Join(dir, "store")
	s, err := store.OpenStore(db, o)
	if err != nil {
		return r, err
	}
	m := harness.NewManager(s, harness.Options{})
	var id string
	if fs != nil {
		fs.Reset()
	}
	r.Elapsed, r.CPU, err = measure(func() error {
		h, err := m.Create(t)
		if err != nil {
			return err
		}
		id = h.ID()
		if err := h.Run(ctx); err != nil {
			return err
		}
		if st := h.State(); st.Status != statefmt.StatusCompleted {
			return fmt.Errorf("harness %s: %s (%s)", id, st.Status, st.StatusReason)
		}
		return nil
	})
	if fs != nil {
		r.Fsyncs = fs.Count()
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	if r.Bytes, err = dirBytes(db); err != nil {
		return r, err
	}
	s, err = store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		return r, err
	}
	defer s.Close()
	st, err := s.Restore(id)
	if err != nil {
		return r, err
	}
	byID := map[string]string{}
	for _, ps := range st.Plan.Steps {
		if ps.Output != nil {
			byID[ps.ID] = *ps.Output
		}
	}
	for _, id := range ids {
		r.Outputs = append(r.Outputs, byID[id])
	}
	return r, nil
}

func stepKey(i int) []byte { return fmt.Appendf(nil, "step/%08d", i) }

func runBarePebble(_ context.Context, w *workload, dir string, counted bool) (run, error) {
	r := run{Fsyncs: -1}
	o := &pebble.Options{Logger: quiet{}}
	var fs *syncfs.FS
	if counted {
		fs = syncfs.New()
		o.FS = fs
	}
	path := filepath.Join(dir, "pebble")
	db, err := pebble.Open(path, o)
	if err != nil {
		return r, err
	}
	if fs != nil {
		fs.Reset()
	}
	r.Elapsed, r.CPU, err = measure(func() error {
		for i, c := range w.Chunks {
			out, err := w.read(c)
			if err != nil {
				return err
			}
			b := db.NewBatch()
			if err := b.Set(stepKey(i), []byte(out), nil); err != nil {
				return err
			}
			if err := b.Commit(pebble.Sync); err != nil {
				return err
			}
			b.Close()
		}
		return nil
	})
	if fs != nil {
		r.Fsyncs = fs.Count()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, err
	}
	if r.Bytes, err = dirBytes(path); err != nil {
		return r, err
	}
	db, err = pebble.Open(path, &pebble.Options{Logger: quiet{}})
	if err != nil {
		return r, err
	}
	defer db.Close()
	for i := range w.Chunks {
		v, closer, err := db.Get(stepKey(i))
		if err != nil {
			return r, fmt.Errorf("step %d: %w", i, err)
		}
		r.Outputs = append(r.Outputs, string(v))
		closer.Close()
	}
	return r, nil
}

// dbosRunner runs the workload as one DBOS workflow whose steps each read a chunk
// (dbos.RunAsStep: DBOS records each step's output in its system database before the next).
// full opens the SQLite database the way DBOS does but with synchronous=FULL; otherwise DBOS
// opens it itself from a sqlite: URL, with its default synchronous=NORMAL.
func dbosRunner(full bool) func(context.Context, *workload, string, bool) (run, error) {
	return func(ctx context.Context, w *workload, dir string, _ bool) (run, error) {
		r := run{Fsyncs: -1}
		path := filepath.Join(dir, "dbos", "system.sqlite")
		cfg := dbos.Config{AppName: "peers", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if full {
			if err := mkdirAll(filepath.Dir(path)); err != nil {
				return r, err
			}
			db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)"+
				"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
			if err != nil {
				return r, err
			}
			db.SetMaxOpenConns(8)
			db.SetMaxIdleConns(4)
			defer db.Close()
			var sync int
			var mode string
			if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
				return r, err
			}
			if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
				return r, err
			}
			if sync != 2 || mode != "wal" {
				return r, fmt.Errorf("sqlite: synchronous=%d, journal_mode=%s; want 2 (FULL) and wal", sync, mode)
			}
			cfg.SQLiteSystemDB = db
		} else {
			cfg.DatabaseURL = "sqlite:" + path
		}
		dctx, err := dbos.NewContext(ctx, cfg)
		if err != nil {
			return r, err
		}
		shut := func() { _ = dbos.Shutdown(dctx, 10*time.Second) }
		workflow := func(ctx dbos.Context, n int) (int, error) {
			for i := range n {
				c := w.Chunks[i]
				if _, err := dbos.RunAsStep(ctx, func(context.Context) (string, error) { return w.read(c) }, dbos.WithStepName("read_file")); err != nil {
					return i, err
				}
			}
			return n, nil
		}
		dbos.RegisterWorkflow(dctx, workflow, dbos.WithWorkflowName("peers"))
		if err := dbos.Launch(dctx); err != nil {
			shut()
			return r, err
		}
		const wfID = "peers-run"
		r.Elapsed, r.CPU, err = measure(func() error {
			h, err := dbos.RunWorkflow(dctx, workflow, len(w.Chunks), dbos.WithWorkflowID(wfID))
			if err != nil {
				return err
			}
			got, err := h.GetResult()
			if err == nil && got != len(w.Chunks) {
				err = fmt.Errorf("workflow ran %d steps of %d", got, len(w.Chunks))
			}
			return err
		})
		if err != nil {
			shut()
			return r, err
		}
		steps, err := dbos.GetWorkflowSteps(dctx, wfID, dbos.WithStepsLoadOutput(true))
		shut()
		if err != nil {
			return r, err
		}
		slices.SortFunc(steps, func(a, b dbos.StepInfo) int { return a.StepID - b.StepID })
		for _, s := range steps {
			// DBOS's default serializer stores base64 of the JSON; listing steps gives back the
			// JSON text, for the caller to decode into the step's type.
			raw, ok := s.Output.(string)
			var out string
			if !ok || json.Unmarshal([]byte(raw), &out) != nil {
				return r, fmt.Errorf("step %d: output %T is not a JSON string", s.StepID, s.Output)
			}
			r.Outputs = append(r.Outputs, out)
		}
		if full {
			// Close our pool now (DBOS closes its own at Shutdown), so that both runs measure
			// the files of a closed database.
			if err := cfg.SQLiteSystemDB.Close(); err != nil {
				return r, err
			}
		}
		r.Bytes, err = dirBytes(filepath.Dir(path))
		return r, err
	}
}
