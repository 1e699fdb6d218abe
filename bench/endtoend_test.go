package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/syncfs"
)

// The end-to-end measurement runs real harnesses to the step count it asks for, each step's
// output being the text read, and falls back to generated text where a machine has none.
func TestEndToEndRunsRealStepsOnRealOrGeneratedText(t *testing.T) {
	for _, dirs := range [][]string{textDirs, {filepath.Join(t.TempDir(), "none")}} {
		saved := textDirs
		textDirs = dirs
		ws := t.TempDir()
		files, lines, source, err := textCorpus(ws, 256<<10)
		textDirs = saved
		if err != nil || len(files) < 3 || len(files) != len(lines) {
			t.Fatalf("corpus from %v: %d files, %v", dirs, len(files), err)
		}
		t.Logf("corpus: %s", source)
		o := Options{Dir: t.TempDir(), Quick: true}
		r, err := runE2E(context.Background(), o, files, lines, ws, 40, 40, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.steps != 3*39 || len(r.gaps) != 3*38 || r.wall <= 0 || r.disk <= 0 || len(r.outputs) != 3*40 {
			t.Fatalf("steps %d, gaps %d, wall %v, disk %d, outputs %d", r.steps, len(r.gaps), r.wall, r.disk, len(r.outputs))
		}
		// Counted while all three ran: some of the steps after the first, over a window inside
		// the measured run.
		if n := r.together * r.window.Seconds(); r.window <= 0 || r.window > r.wall || n < 1 || n > float64(r.steps)+0.5 {
			t.Fatalf("steps per second while all ran: %.1f over %v (%d steps in %v)", r.together, r.window, r.steps, r.wall)
		}
		var text strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(ws, f))
			if err != nil {
				t.Fatal(err)
			}
			text.Write(b)
		}
		for _, out := range r.outputs {
			if len(out) == 0 || !strings.Contains(text.String(), firstLine(string(out))) {
				t.Fatalf("a step's output is not text it read: %.80q", out)
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// A durable step costs one fsync: a harness's run makes one per checkpoint (one per step, the
// last of which ends the harness, and two before them: its creation and its start, its plan
// with it) and the store's heads file two at each rewrite (at most every 10 s), no more;
// harnesses that run at once share theirs.
func TestEndToEndStepsMakeOneFsyncEach(t *testing.T) {
	ws := t.TempDir()
	files, lines, _, err := textCorpus(ws, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: t.TempDir(), Quick: true}
	one, err := runE2E(context.Background(), o, files, lines, ws, 60, 60, 1, syncfs.New())
	if err != nil {
		t.Fatal(err)
	}
	// At most 60 + 2 + the heads file's 2, and 4 more on the fallback backend, whose chains
	// are keyframes only: their bytes make Pebble flush its memtable to a table.
	if one.fsyncs < 60 || one.fsyncs > 60+2+2+4 {
		t.Fatalf("one harness of 60 steps made %d fsyncs", one.fsyncs)
	}
	// Alone, they would make 8 × 62; at once, their commits share fsyncs (Pebble's group
	// commit). How many share one depends on the disk's fsync against the CPUs' step (on this
	// machine's disk, 0.35-0.6 of 8 × 62), so the harnesses run on a disk whose fsync takes
	// 2 ms longer, as an SD card's does: the commits that queue during one fsync share the
	// next, and a store that synced each on its own would make all 8 × 62.
	many, err := runE2E(context.Background(), o, files, lines, ws, 60, 60, 8, syncfs.Slow(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if many.fsyncs < 60 || many.fsyncs > 8*(60+2)/2 {
		t.Fatalf("8 harnesses of 60 steps at once made %d fsyncs: they do not share them", many.fsyncs)
	}
	t.Logf("fsyncs: one harness %d for 60 steps, 8 harnesses %d for 480", one.fsyncs, many.fsyncs)
}
