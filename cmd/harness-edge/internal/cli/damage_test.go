package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(f string, args ...any) {
	panic(f)
}

// damagedFixture runs three tasks with real processes and leaves them as a daemon killed
// mid-run would (status running), in a store that is closed; it returns the store and the ids.
func damagedFixture(t *testing.T, dir string) (string, []string) {
	t.Helper()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	ids := []string{"da", "db", "dc"}
	for _, id := range ids {
		f := writeTask(t, dir, id+".yaml", daemonTask(id, ws, 3, "1ms", false))
		if code, out := binary(t, db, "run", f); code != ExitOK {
			t.Fatalf("run %s: exit %d: %s", id, code, out)
		}
	}
	s, err := store.OpenStore(db, store.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, err := s.Restore(id)
		if err != nil {
			t.Fatal(err)
		}
		st.Status, st.StatusReason = statefmt.StatusRunning, ""
		if _, err := s.Persist(st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return db, ids
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, frac float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[int(float64(len(b))*frac)] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// notCrashed fails when a command panicked (Go exits 2 with a goroutine dump).
func notCrashed(t *testing.T, what string, code int, out string) {
	t.Helper()
	if code == 2 || strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
		t.Fatalf("%s crashed: exit %d\n%s", what, code, out)
	}
}

// A flipped bit early in the newest write-ahead log makes Pebble drop the checkpoints after
// it. verify names the harnesses that lost acknowledged checkpoints and exits 1, and show
// says the harness is damaged instead of "not found" or an older state, on every open.
func TestFlippedLogBitIsReportedByTheCommands(t *testing.T) {
	db, ids := damagedFixture(t, t.TempDir())
	logs, _ := filepath.Glob(filepath.Join(db, "db", "*.log"))
	slices.Sort(logs)
	flipByte(t, logs[len(logs)-1], 0.10)
	for range 2 {
		code, out := binary(t, db, "verify")
		notCrashed(t, "verify", code, out)
		if code != ExitError || !strings.Contains(out, "damaged") {
			t.Fatalf("verify after a flipped bit in the log: exit %d\n%s", code, out)
		}
		for _, id := range ids {
			if !strings.Contains(out, id+":") {
				continue
			}
			code, out := binary(t, db, "show", id)
			notCrashed(t, "show", code, out)
			if code == ExitOK || !strings.Contains(out, "harness "+id+" is damaged") {
				t.Fatalf("show %s of a damaged harness: exit %d\n%s", id, code, out)
			}
		}
	}
	// A damaged harness can be deleted: its stored task says where its worktree would be, and
	// nothing else of it need be read.
	_, out := binary(t, db, "verify")
	deleted := 0
	for _, id := range ids {
		if !strings.Contains(out, id+":") {
			continue
		}
		if code, out := binary(t, db, "delete", id, "--force"); code != ExitOK {
			t.Fatalf("delete --force %s of a damaged harness: exit %d\n%s", id, code, out)
		}
		deleted++
	}
	if code, out := binary(t, db, "verify"); deleted == 0 || code != ExitOK {
		t.Fatalf("verify after deleting %d damaged harnesses: exit %d\n%s", deleted, code, out)
	}
}

// A store whose manifest marker is gone is refused, naming the file, and left as it was.
func TestMissingManifestMarkerIsRefusedByTheCommands(t *testing.T) {
	db, _ := damagedFixture(t, t.TempDir())
	m, _ := filepath.Glob(filepath.Join(db, "db", "marker.manifest.*"))
	if len(m) != 1 {
		t.Fatalf("markers: %v", m)
	}
	if err := os.Remove(m[0]); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(filepath.Join(db, "db"))
	for _, args := range [][]string{{"verify"}, {"ls"}} {
		code, out := binary(t, db, args...)
		notCrashed(t, args[0], code, out)
		if code == ExitOK || !strings.Contains(out, "marker.manifest") {
			t.Fatalf("%s without the manifest marker: exit %d\n%s", args[0], code, out)
		}
	}
	after, _ := os.ReadDir(filepath.Join(db, "db"))
	if len(before) != len(after) {
		t.Fatalf("the database directory changed: %d files, then %d", len(before), len(after))
	}
}

// A damaged table block is named by every command that meets it, none panics, and the daemon
// starts over it, leaves the damaged harness alone and serves the rest, verify and report
// included.
func TestDamagedTableBlockCommandsAndDaemon(t *testing.T) {
	db, ids := damagedFixture(t, t.TempDir())
	pdb, err := pebble.Open(filepath.Join(db, "db"), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(db, "db", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no tables")
	}
	flipByte(t, ssts[len(ssts)-1], 0.4)

	code, out := binary(t, db, "verify")
	notCrashed(t, "verify", code, out)
	if code != ExitError || !strings.Contains(out, "damaged") && !strings.Contains(out, "corrupt") {
		t.Fatalf("verify over a damaged table block: exit %d\n%s", code, out)
	}
	var hit []string
	for _, id := range ids {
		if strings.Contains(out, id+":") || strings.Contains(out, id+" record") {
			hit = append(hit, id)
		}
	}
	if len(hit) == 0 {
		t.Fatalf("verify names no harness:\n%s", out)
	}
	for _, args := range [][]string{{"ls"}, {"report"}, {"doctor"}} {
		code, out := binary(t, db, args...)
		notCrashed(t, args[0], code, out)
	}
	for _, id := range ids {
		for _, args := range [][]string{{"show", id}, {"inspect", id}, {"export", id}, {"events", id}} {
			code, out := binary(t, db, args...)
			notCrashed(t, strings.Join(args, " "), code, out)
			if code != ExitOK && !strings.Contains(out, id) {
				t.Fatalf("%s fails without naming the harness: exit %d\n%s", strings.Join(args, " "), code, out)
			}
		}
	}

	d := startDaemon(t, db)
	tok, err := os.ReadFile(filepath.Join(db, control.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if code, body := d.http("GET", "/v1/verify", token, nil); code != 200 || !strings.Contains(body, hit[0]) {
		t.Fatalf("/v1/verify: %d %s", code, body)
	}
	if code, body := d.http("GET", "/v1/report", token, nil); code != 200 {
		t.Fatalf("/v1/report: %d %s", code, body)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited:\n%s", d.log)
	default:
	}
	if strings.Contains(d.log.String(), "panic") {
		t.Fatalf("the daemon panicked:\n%s", d.log)
	}
}

// doctor --repair on a store whose write-ahead log lost acknowledged checkpoints: it says what
// it recovered and quarantined, verify passes afterwards, a recovered harness reads back, and
// a second repair has nothing to do. It refuses a store a daemon owns.
func TestDoctorRepairRecoversAndQuarantinesByName(t *testing.T) {
	db, ids := damagedFixture(t, t.TempDir())
	logs, _ := filepath.Glob(filepath.Join(db, "db", "*.log"))
	slices.Sort(logs)
	flipByte(t, logs[len(logs)-1], 0.10)
	code, out := binary(t, db, "verify")
	if code != ExitError {
		t.Fatalf("verify before the repair: exit %d\n%s", code, out)
	}
	code, out = binary(t, db, "doctor", "--repair")
	notCrashed(t, "doctor --repair", code, out)
	if code != ExitOK || !strings.Contains(out, "repair      ") {
		t.Fatalf("doctor --repair: exit %d\n%s", code, out)
	}
	if code, out := binary(t, db, "verify"); code != ExitOK {
		t.Fatalf("verify after the repair: exit %d\n%s", code, out)
	}
	for _, id := range ids {
		if !strings.Contains(out, "repair      "+id+": recovered") {
			continue
		}
		if code, sout := binary(t, db, "show", id); code != ExitOK || !strings.Contains(sout, "harness "+id) {
			t.Fatalf("show %s after the repair: exit %d\n%s\n(doctor said:\n%s)", id, code, sout, out)
		}
	}
	if code, out := binary(t, db, "doctor", "--repair"); code != ExitOK || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("a second doctor --repair: exit %d\n%s", code, out)
	}
	startDaemon(t, db)
	code, out = binary(t, db, "doctor", "--repair")
	if code == ExitOK || !strings.Contains(out, "stop the daemon first") {
		t.Fatalf("doctor --repair beside a daemon: exit %d\n%s", code, out)
	}
}
