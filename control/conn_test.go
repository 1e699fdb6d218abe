package control_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

func TestConnectWithoutOwnerOpensTheStore(t *testing.T) {
	dir := storeDir(t)
	c := connect(t, dir)
	if h, owned := c.Owner(); owned {
		t.Fatalf("an owner answered: %+v", h)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Owner != "none" {
		t.Fatalf("health: %+v %v", h, err)
	}
	if l, err := c.List(context.Background()); err != nil || len(l) != 0 {
		t.Fatalf("list: %v %v", l, err)
	}
	// The connection holds the store until it is closed.
	if _, err := store.OpenStore(dir, store.StoreOptions{}); !errors.Is(err, store.ErrStoreInUse) {
		t.Fatalf("opening the store beside the connection: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	assertStoreFree(t, dir)
}

func TestConnectWaitsForAStoreHeldForAMoment(t *testing.T) {
	dir := storeDir(t)
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { s.Close() })
	start := time.Now()
	c := connect(t, dir)
	if _, owned := c.Owner(); owned {
		t.Fatal("an owner answered")
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("connected after %v, while the store was held", waited)
	}
}

func TestConnectGivesUpOnAStoreHeldTooLong(t *testing.T) {
	dir := storeDir(t)
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := control.Connect(dir); !errors.Is(err, store.ErrStoreInUse) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("connect to a held store: %v", err)
	}
}

func TestConnectWhileOwnedGoesThroughTheSocket(t *testing.T) {
	dir := storeDir(t)
	o := own(t, dir)
	defer o.Close()
	if fi, err := os.Stat(control.SocketPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v", err)
	}
	c := connect(t, dir)
	h, owned := c.Owner()
	if !owned || h.Owner != "run" || h.PID != os.Getpid() {
		t.Fatalf("owner: %+v %v", h, owned)
	}
	if _, ok := c.API.(*control.Client); !ok {
		t.Fatalf("the connection's API is a %T, not the owner's client", c.API)
	}
	if l, err := c.List(context.Background()); err != nil || len(l) != 0 {
		t.Fatalf("list through the socket: %v %v", l, err)
	}
	// A foreground run does not take submissions.
	_, err := c.Submit(context.Background(), control.Submission{Task: []byte("id: x\n")})
	if !errors.Is(err, control.ErrNotDaemon) || !strings.Contains(err.Error(), "owner: run") {
		t.Fatalf("submit to a foreground run: %v", err)
	}
}

func TestSecondOwnIsRefusedNamingTheForegroundRun(t *testing.T) {
	dir := storeDir(t)
	o := own(t, dir)
	defer o.Close()
	second, err := control.Own(dir, control.Config{})
	if err == nil {
		second.Close()
		t.Fatal("a second owner was let in")
	}
	var oe *control.OwnedError
	want := fmt.Sprintf("store in use: %s is owned by a foreground `harness-edge run` (pid %d, no harness running yet): wait for it, or pause it with `harness-edge pause ID`", dir, os.Getpid())
	if !errors.Is(err, store.ErrStoreInUse) || !errors.As(err, &oe) || oe.Owner.Owner != "run" || err.Error() != want {
		t.Fatalf("second owner: %v\nwant: %s", err, want)
	}
	// Once the run's harness runs, the refusal names it.
	h, err := o.Server().Manager().Create(scriptTask(t, "fg", 3, "300ms"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(context.Background()) }()
	defer func() { o.Server().Manager().Pause("fg", "test over"); <-done }()
	for deadline := time.Now().Add(10 * time.Second); !h.Running() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	_, err = control.Own(dir, control.Config{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d, running fg)", os.Getpid())) {
		t.Fatalf("second owner while fg runs: %v", err)
	}
}

func TestConnectAfterTheOwnerClosedOpensTheStore(t *testing.T) {
	dir := storeDir(t)
	o := own(t, dir)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(control.SocketPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("a closed owner left its socket: %v", err)
	}
	c := connect(t, dir)
	if h, owned := c.Owner(); owned {
		t.Fatalf("an owner answered: %+v", h)
	}
	if h, err := c.Health(context.Background()); err != nil || h.Owner != "none" {
		t.Fatalf("health: %+v %v", h, err)
	}
}

func TestConnectIgnoresAStaleSocketAndTheNextOwnerReplacesIt(t *testing.T) {
	dir := storeDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A crashed owner leaves its socket file behind, with nobody listening.
	l, err := net.Listen("unix", control.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	c := connect(t, dir)
	if _, owned := c.Owner(); owned {
		t.Fatal("a stale socket answered")
	}
	c.Close()
	// The next owner replaces the stale socket.
	o := own(t, dir)
	defer o.Close()
	if h, owned := connect(t, dir).Owner(); !owned || h.Owner != "run" {
		t.Fatalf("owner after replacing the stale socket: %+v %v", h, owned)
	}
}

func TestDoRetriesOnTheStoreWhenTheOwnerLeftBeforeTheRequest(t *testing.T) {
	dir := storeDir(t)
	o := own(t, dir)
	var tries []string
	err := control.Do(dir, func(c *control.Conn) error {
		h, owned := c.Owner()
		if owned {
			// The owner ends between the connection and the request.
			o.Close()
			tries = append(tries, h.Owner.String())
		} else {
			tries = append(tries, "store")
		}
		_, err := c.List(context.Background())
		if owned && !errors.Is(err, control.ErrNotSent) {
			t.Errorf("a request to an owner that has gone: %v, want ErrNotSent", err)
		}
		return err
	})
	if err != nil || strings.Join(tries, ",") != "run,store" {
		t.Fatalf("do: %v after tries %v", err, tries)
	}
	assertStoreFree(t, dir)
}

func TestDoDoesNotRetryOtherErrors(t *testing.T) {
	dir := storeDir(t)
	tries := 0
	err := control.Do(dir, func(c *control.Conn) error {
		tries++
		_, err := c.State(context.Background(), "nope")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) || tries != 1 {
		t.Fatalf("do: %v after %d tries", err, tries)
	}
}

func TestDoGivesUpAfterThreeTries(t *testing.T) {
	dir := storeDir(t)
	tries := 0
	err := control.Do(dir, func(*control.Conn) error {
		tries++
		return fmt.Errorf("%w (%w)", control.ErrOwnerGone, control.ErrNotSent)
	})
	if !errors.Is(err, control.ErrNotSent) || tries != 3 {
		t.Fatalf("do: %v after %d tries", err, tries)
	}
}

func TestOwnedRunsHarnessesAndReleasesTheStoreOnClose(t *testing.T) {
	dir := storeDir(t)
	o := own(t, dir)
	h, err := o.Server().Manager().Create(scriptTask(t, "f", 1, "1ms"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another process sees it through the socket.
	st, err := connect(t, dir).State(context.Background(), "f")
	if err != nil || st.Status != "completed" {
		t.Fatalf("state through the socket: %v %v", st, err)
	}
	// Its JSON comes through as the owner wrote it: EncodeJSON's bytes of that state.
	js, err := connect(t, dir).StateJSON(context.Background(), "f")
	want, _ := statefmt.EncodeJSON(st)
	if err != nil || !bytes.Equal(js, want) {
		t.Fatalf("state JSON through the socket differs from the state's (%v):\n%s\nwant:\n%s", err, js, want)
	}
	if own, err := o.Server().StateJSON(context.Background(), "f"); err != nil || !bytes.Equal(own, want) {
		t.Fatalf("the owner's state JSON differs (%v)", err)
	}
	if _, err := connect(t, dir).StateJSON(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("state JSON of an unknown harness through the socket: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	assertStoreFree(t, dir)
}
