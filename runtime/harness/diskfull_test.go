package harness_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/fakeclock"
	"github.com/harness-edge/harness-edge/internal/tmpfs"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// A harness whose step fills its store's disk pauses for it; resumed while the disk is still
// full, it stays paused for that reason and says so as a pause (ErrPaused and ErrDiskFull, the
// harness named once), not as a failed checkpoint; resumed once there is room, it completes.
func TestResumeOnAStillFullDiskStaysPausedForIt(t *testing.T) {
	mnt := tmpfs.Mount(t, "48m")
	e := &env{t: t, dir: mnt, clock: fakeclock.New(), rec: &recorder{}}
	e.open()
	t.Cleanup(e.close)
	// Leave 8 MiB: less than a running harness's checkpoint must leave, more than a pause needs.
	fill, filler := tmpfs.FillOnce(t, mnt, 8<<20)
	tk := parseTask(t, tmpfs.FillingTask("full", "", fill))
	h, err := e.m.Create(tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); !errors.Is(err, harness.ErrPaused) || !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("the run that filled the disk: %v, want a pause for the full disk", err)
	}
	h, err = e.m.ResumeFromCheckpoint("full")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(context.Background())
	if !errors.Is(err, harness.ErrPaused) || !errors.Is(err, store.ErrDiskFull) || strings.Count(err.Error(), "harness full") != 1 {
		t.Fatalf("resumed on a disk still full: %v, want a pause for the full disk that names the harness once", err)
	}
	if st := h.State(); !harness.PausedForDiskFull(st) {
		t.Fatalf("resumed on a disk still full, the harness is %s (%q)", st.Status, st.StatusReason)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h, err = e.m.ResumeFromCheckpoint("full")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil || h.State().Status != statefmt.StatusCompleted {
		t.Fatalf("resumed with room again: %v (%s)", err, h.State().Status)
	}
}
