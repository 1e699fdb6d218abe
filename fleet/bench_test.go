package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// BenchmarkStep measures a durable step (a tool call and a synced checkpoint, through a
// daemon) with fleet replication off and on (a hub on loopback, in a process of its own or in
// the daemon's), and for "on" the replication
// lag: from a checkpoint's commit on the device to JetStream's acknowledgement of its index
// entry (p50, p99).
func BenchmarkStep(b *testing.B) {
	for _, mode := range []string{"off", "on,hub=process", "on,hub=in-process"} {
		b.Run("replication="+mode, func(b *testing.B) {
			cfg := control.DaemonConfig{Dir: storeIn(b, "store"), Concurrency: 1, Grace: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)}
			var link *fleet.Link
			hubPID := 0
			if mode != "off" {
				var u string
				if mode == "on,hub=process" {
					u, hubPID = hubProcessPID(b)
				} else {
					hub, err := fleet.StartHub(fleet.HubConfig{Dir: b.TempDir(), Listen: "127.0.0.1:0"})
					if err != nil {
						b.Fatal(err)
					}
					defer hub.Shutdown()
					u = hub.URL()
				}
				var err error
				if link, err = fleet.NewLink(fleet.LinkConfig{NATS: fleet.Options{URL: u}, Device: "bench"}); err != nil {
					b.Fatal(err)
				}
				cfg.Beside = link.Run
				cfg.Options.Sinks = append(cfg.Options.Sinks, link.Replicator)
			}
			ctx, cancel := context.WithCancel(context.Background())
			d, err := control.StartDaemon(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { cancel(); d.Wait() }()
			b.ResetTimer()
			cpu0, hubCPU0 := processCPU(b, 0), processCPU(b, hubPID)
			id, err := d.Server().Submit(ctx, control.Submission{Task: taskYAML(b, "bench", b.N, "", false), Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			for {
				e, err := d.Server().Store().Index(id)
				if err != nil {
					b.Fatal(err)
				}
				if e.Status == statefmt.StatusCompleted {
					break
				}
				if e.Status == statefmt.StatusFailed || e.Status == statefmt.StatusPaused {
					b.Fatalf("the harness ended %s", e.Status)
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			if link == nil {
				b.ReportMetric(float64((processCPU(b, 0)-cpu0).Microseconds())/float64(b.N), "cpu-µs/step")
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for link.Replicator.Stats().Backlog > 0 || link.Replicator.Stats().Indexes == 0 {
				if time.Now().After(deadline) {
					b.Fatalf("replication did not catch up: %+v", link.Replicator.Stats())
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.ReportMetric(float64((processCPU(b, 0)-cpu0).Microseconds())/float64(b.N), "cpu-µs/step")
			if hubPID != 0 {
				b.ReportMetric(float64((processCPU(b, hubPID)-hubCPU0).Microseconds())/float64(b.N), "hub-cpu-µs/step")
			}
			st := link.Replicator.Stats()
			b.ReportMetric(float64(st.Messages)/float64(b.N), "msgs/step")
			b.ReportMetric(float64(st.Bytes)/float64(b.N), "wire-B/step")
			lags := st.Lags
			slices.Sort(lags)
			if len(lags) > 0 {
				b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
				b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
			}
		})
	}
}

// processCPU is the CPU time (user and system) a process used so far: this one for pid 0.
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			tb.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command's name (in parentheses): utime and stime are the 12th and
	// 13th, in clock ticks (100 a second on Linux).
	rest := string(data[bytes.LastIndexByte(data, ')')+2:])
	f := strings.Fields(rest)
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkFenceRead measures what checking the fence costs a device: one read of a harness's
// entry (the guard's check before a run), from a hub in a process of its own on loopback.
func BenchmarkFenceRead(b *testing.B) {
	nc, err := fleet.Connect(fleet.Options{URL: hubProcess(b)}, false)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.FenceBucket)
	if err != nil {
		b.Fatal(err)
	}
	e := store.IndexEntry{ID: "job", CreatedAt: time.Now()}
	if _, err := fleet.TakeFence(ctx, kv, e, nil, fleet.Fence{Owner: "b", From: "a", Request: "r"}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if f, err := fleet.ReadFence(ctx, kv, e); err != nil || f == nil {
			b.Fatal(f, err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
