package harness_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/fakeclock"
	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store/memstore"
)

// The harness core runs on any Store: random script tasks, interrupted and resumed by a new
// manager (as a restarted process would) over the in-memory store, end in the same state and
// with the same events as uninterrupted runs on the Pebble store.
func TestPropertyInMemoryStoreRunsLikePebble(t *testing.T) {
	t.Parallel() // each case has its own store, clock and workspace
	p := proptest.Props(t, 100)
	p.Property("memstore with restarts == Pebble", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 7))
			src := randomTask(r, "x", "WS", r.IntN(4) == 0, true)
			ref := newEnv(t)
			defer ref.close()
			want, err := ref.m.Dispatch(context.Background(), parseTask(t, strings.ReplaceAll(src, "WS", t.TempDir())))
			if err != nil {
				return err.Error()
			}
			refH, _ := ref.m.Get("x")

			db := memstore.New()
			rec := &recorder{}
			clk := fakeclock.New()
			open := func() *harness.Manager {
				return harness.NewManager(db, harness.Options{Clock: clk, Sinks: []event.Sink{rec}})
			}
			m := open()
			h, err := m.Create(parseTask(t, strings.ReplaceAll(src, "WS", t.TempDir())))
			if err != nil {
				return err.Error()
			}
			for round := 0; ; round++ {
				ctx, cancel := context.WithCancel(context.Background())
				seen, stopAt := 0, 1+r.IntN(3)
				rec.hook = func(ev event.Event) {
					if ev.Type == event.StepStarted && round < 3 {
						if seen++; seen == stopAt {
							cancel()
						}
					}
				}
				err := h.Run(ctx)
				cancel()
				rec.hook = nil
				if err == nil {
					break
				}
				if !errors.Is(err, harness.ErrPaused) {
					return err.Error()
				}
				m = open() // a restart: everything comes back from the store
				if h, err = m.ResumeFromCheckpoint("x"); err != nil {
					return err.Error()
				}
			}
			got := h.State()
			if got.Status != want.Status {
				return fmt.Sprintf("status %s on memstore, %s on Pebble", got.Status, want.Status)
			}
			if a, b := comparable(got), comparable(refH.State()); !reflect.DeepEqual(a.Plan, b.Plan) || len(a.ToolCallHistory) != len(b.ToolCallHistory) {
				return fmt.Sprintf("memstore state differs from Pebble's:\n%+v\n%+v", a.Plan, b.Plan)
			}
			var stored []event.Event
			if err := db.Events("x", 0, func(e event.Event) bool { stored = append(stored, e); return true }); err != nil {
				return err.Error()
			}
			last := stored[len(stored)-2] // the final transition, before its checkpoint event
			if last.Type != event.StateTransition || last.To != statefmt.Status(want.Status) {
				return fmt.Sprintf("the log does not end with the final transition: %+v", last)
			}
			return ""
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}
