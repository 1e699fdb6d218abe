package control_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// logBuffer collects a daemon's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon starts a daemon on the store in dir, with the HTTP API on 127.0.0.1:0; stop
// ends it and waits until it has stopped.
func startDaemon(t *testing.T, dir string) (d *control.Daemon, log *logBuffer, stop func()) {
	t.Helper()
	log = &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, HTTPAddr: "127.0.0.1:0", Concurrency: 2, Grace: 20 * time.Second,
		Version: "test", Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); d.Wait() }) }
	t.Cleanup(stop)
	return d, log, stop
}

func TestDaemonAnswersHealthOverSocketAndHTTPWithBearerToken(t *testing.T) {
	dir := storeDir(t)
	d, log, stop := startDaemon(t, dir)
	ctx := context.Background()

	c := connect(t, dir)
	if h, owned := c.Owner(); !owned || h.Owner != "daemon" || h.PID != os.Getpid() || h.Version != "test" {
		t.Fatalf("owner through the socket: %+v %v", h, owned)
	}
	if h, err := c.Health(ctx); err != nil || !h.OK || h.Owner != "daemon" {
		t.Fatalf("health through the socket: %+v %v", h, err)
	}

	base := "http://" + d.HTTPAddr().String()
	if !strings.Contains(log.String(), `msg="HTTP API listening" addr=`+d.HTTPAddr().String()) {
		t.Fatalf("the log does not say where HTTP listens:\n%s", log)
	}
	tok, err := control.Token(dir)
	if err != nil {
		t.Fatal(err)
	}
	anonymous, authed := control.NewHTTPClient(base, ""), control.NewHTTPClient(base, tok)
	// Without the token health says that the daemon is up and its version, nothing more.
	if h, err := anonymous.Health(ctx); err != nil || !h.OK || h.Version != "test" || h.Owner != "" || h.PID != 0 || h.Running != nil || h.Queued != nil || !h.Started.IsZero() {
		t.Fatalf("health over HTTP without the token: %+v %v", h, err)
	}
	if h, err := authed.Health(ctx); err != nil || !h.OK || h.Owner != "daemon" || h.PID != os.Getpid() {
		t.Fatalf("health over HTTP with the token: %+v %v", h, err)
	}
	var ae *control.APIError
	if _, err := anonymous.List(ctx); !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("list over HTTP without the token: %v, want 401", err)
	}
	if _, err := control.NewHTTPClient(base, strings.Repeat("0", len(tok))).List(ctx); !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("list over HTTP with a wrong token: %v, want 401", err)
	}
	if l, err := authed.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("list over HTTP with the token: %v %v", l, err)
	}

	// Nobody else owns the store while the daemon does.
	o, err := control.Own(dir, control.Config{})
	if err == nil {
		o.Close()
		t.Fatal("a foreground run was let in beside the daemon")
	}
	want := fmt.Sprintf("%s is owned by the harness-edge daemon (pid %d): hand it the task with `harness-edge submit TASK`, or stop the daemon first", dir, os.Getpid())
	if !errors.Is(err, store.ErrStoreInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("own beside the daemon: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	second, err := control.StartDaemon(ctx2, control.DaemonConfig{Dir: dir, Concurrency: 1})
	if err == nil {
		cancel2()
		second.Wait()
		t.Fatal("a second daemon started")
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("second daemon: %v", err)
	}

	stop()
	if _, err := os.Stat(control.SocketPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("a stopped daemon left its socket: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", d.HTTPAddr().String(), time.Second); err == nil {
		conn.Close()
		t.Fatal("a stopped daemon still listens on HTTP")
	}
	if !strings.Contains(log.String(), `msg="daemon stopped"`) {
		t.Fatalf("the log does not say the daemon stopped:\n%s", log)
	}
	assertStoreFree(t, dir)
}

func TestDaemonRecoversARunningHarnessAndPausesItOnShutdown(t *testing.T) {
	dir := storeDir(t)
	// A harness that was running when its process died.
	db, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := harness.NewManager(db, harness.Options{}).Create(scriptTask(t, "r", 3, "30s"))
	if err != nil {
		t.Fatal(err)
	}
	st := h.State()
	st.Status = statefmt.StatusRunning
	if _, err := db.Persist(st); err != nil {
		t.Fatal(err)
	}
	db.Close()

	d, log, stop := startDaemon(t, dir)
	if !slices.Equal(d.Resumed(), []string{"r"}) || !strings.Contains(log.String(), "resumed=r") {
		t.Fatalf("resumed %v; log:\n%s", d.Resumed(), log)
	}
	// Wait until its first step runs, following its events through the socket.
	n := waitStepStarted(t, dir, "r", 0, log)
	ctx := context.Background()
	if h, err := d.Server().Health(ctx); err != nil || !slices.Equal(h.Running, []string{"r"}) {
		t.Fatalf("running: %+v %v", h, err)
	}

	begin := time.Now()
	stop()
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("the daemon took %v to stop", took)
	}
	if st := storedState(t, dir, "r"); st.Status != statefmt.StatusPaused || st.StatusReason != harness.ReasonShutdown {
		t.Fatalf("after shutdown r is %v (%v)", st.Status, st.StatusReason)
	}

	// The next daemon resumes what the stopping one paused.
	d, log, stop = startDaemon(t, dir)
	if !slices.Equal(d.Resumed(), []string{"r"}) {
		t.Fatalf("the next daemon resumed %v", d.Resumed())
	}
	waitStepStarted(t, dir, "r", n, log)
	stop()
	if st := storedState(t, dir, "r"); st.Status != statefmt.StatusPaused || st.StatusReason != harness.ReasonShutdown {
		t.Fatalf("after the second shutdown r is %v (%v)", st.Status, st.StatusReason)
	}
}

// waitStepStarted follows the harness's events numbered above after, through the store's
// owner, until a step starts; it returns that event's number.
func waitStepStarted(t *testing.T, dir, id string, after uint64, log *logBuffer) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n uint64
	started := errors.New("step started")
	err := connect(t, dir).Events(ctx, id, after, true, func(e event.Event) error {
		if e.Type == event.StepStarted {
			n = e.N
			return started
		}
		return nil
	})
	if !errors.Is(err, started) {
		t.Fatalf("following %s: %v; log:\n%s", id, err, log)
	}
	return n
}

// storedState reads the harness's last checkpoint from the store, which nobody may hold.
func storedState(t *testing.T, dir, id string) *statefmt.HarnessState {
	t.Helper()
	db, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatalf("the store is still held: %v", err)
	}
	defer db.Close()
	st, err := db.Restore(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDaemonRefusesABadConfigBeforeTouchingTheStore(t *testing.T) {
	dir := storeDir(t)
	for _, c := range []struct {
		cfg  control.DaemonConfig
		want string
	}{
		{control.DaemonConfig{Dir: dir, HTTPAddr: "0.0.0.0:0", Concurrency: 1}, "--allow-remote"},
		{control.DaemonConfig{Dir: dir, Concurrency: 0}, "--concurrency 0: run at least one harness at a time"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		d, err := control.StartDaemon(ctx, c.cfg)
		cancel()
		if err == nil {
			d.Wait()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused daemon made the store: %v", err)
	}
}

// A request about a harness the daemon does not run, refused or not, leaves nothing of it in
// the daemon's memory.
func TestRequestsLeaveTheDaemonsMemoryAsTheyFoundIt(t *testing.T) {
	dir := storeDir(t)
	d, _, stop := startDaemon(t, dir)
	defer stop()
	srv := d.Server()
	ctx := context.Background()
	if err := srv.Freeze(ctx, control.FreezeContinue); err != nil {
		t.Fatal(err)
	}
	h, err := srv.Manager().Create(scriptTask(t, "idle", 1, "1ms"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Manager().Release("idle")
	calls := map[string]func() error{
		"pause":   func() error { return srv.Pause(ctx, "idle") },
		"stop":    func() error { _, err := srv.Stop(ctx, "idle"); return err },
		"resume":  func() error { return srv.Resume(ctx, "idle") },
		"approve": func() error { _, err := srv.Decide(ctx, "idle", "", true, ""); return err },
		"reject":  func() error { _, err := srv.Decide(ctx, "idle", "g1", false, "no"); return err },
	}
	for name, call := range calls {
		if err := call(); err == nil {
			t.Errorf("%s of a completed harness was not refused", name)
		}
		if srv.Manager().Loaded("idle") {
			t.Errorf("a refused %s left the harness loaded", name)
			srv.Manager().Release("idle")
		}
	}
}

// A daemon refused on the way up (here: a token file others can read) says why, and leaves
// nothing behind: no socket, the store free for the next process.
func TestDaemonRefusedAtStartLeavesTheStoreFree(t *testing.T) {
	dir := storeDir(t)
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	tok := filepath.Join(dir, control.TokenName)
	if err := os.WriteFile(tok, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tok, 0o644)
	d, err := control.StartDaemon(context.Background(), control.DaemonConfig{Dir: dir, HTTPAddr: "127.0.0.1:0", Concurrency: 1})
	if err == nil {
		t.Fatalf("the daemon started with a token file others can read: %v", d.HTTPAddr())
	}
	if !errors.Is(err, trust.ErrUntrusted) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("%v", err)
	}
	if _, err := os.Lstat(control.SocketPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("the control socket was left: %v", err)
	}
	s, err = store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatalf("the store was left locked: %v", err)
	}
	s.Close()
}

// Resuming a sub-agent through the API is refused as a conflict (409), naming the parent to
// resume, as the other changes of a sub-agent's course are: not as the daemon's own failure.
func TestResumeOfASubAgentIsAConflictNotAServerError(t *testing.T) {
	_, _, api := daemonWithHTTP(t)
	ctx := context.Background()
	src := fmt.Sprintf(`id: p
agent: A
workspace: %s
agents:
  A: {driver: script, tools: [], script: {steps: {"*": [{output: done}]}}}
  B: {driver: script, tools: [], script: {steps: {"*": [{output: delegated}]}}}
plan:
  - {id: s0, description: step 0, agent: A}
  - {id: s1, description: step 1, agent: B, dependsOn: [s0]}
`, t.TempDir())
	if _, err := api.Submit(ctx, control.Submission{Task: []byte(src), Name: "p.yaml"}); err != nil {
		t.Fatal(err)
	}
	if err := api.Events(ctx, "p", 0, true, func(event.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if st, err := api.State(ctx, "p.s1"); err != nil || st.ParentHarnessID != "p" {
		t.Fatalf("the sub-agent: %+v %v", st, err)
	}
	before, err := api.StateJSON(ctx, "p.s1")
	if err != nil {
		t.Fatal(err)
	}
	var ae *control.APIError
	err = api.Resume(ctx, "p.s1")
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Message != "harness p.s1 is a sub-agent of p: resume p (it resumes its sub-agents)" {
		t.Fatalf("resume of a sub-agent: %v (%+v), want a 409 naming the parent", err, ae)
	}
	if after, err := api.StateJSON(ctx, "p.s1"); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the refused resume changed the sub-agent: %v", err)
	}
}
