package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionJSONNamesTheLoadedBackend(t *testing.T) {
	code, out, errOut := run(t, "version", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v VersionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json is not JSON: %v\n%s", err, out)
	}
	e, warns := bridge.Load()
	if v.Engine.Backend != e.Backend() || v.Engine.ABIVersion != bridge.ABIVersion || v.Arch != bridge.Arch() {
		t.Fatalf("version says %+v, Load says %s", v, e.Backend())
	}
	if want := os.Getenv("HARNESS_EDGE_EXPECT_BACKEND"); want != "" && string(v.Engine.Backend) != want {
		t.Fatalf("backend %s, this run expects %s", v.Engine.Backend, want)
	}
	if (len(warns) > 0) != (len(v.Warnings) > 0) {
		t.Fatalf("warnings not reported: %v", warns)
	}
}

func TestVersionHuman(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != ExitOK || !strings.Contains(out, "engine:") || !strings.Contains(out, fmt.Sprintf("(ABI %d)", bridge.ABIVersion)) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestDoctorSelfCheckPasses(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	code, out, errOut := run(t, "doctor", "--json", "--store", store)
	if code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var rep DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	sc := rep.SelfCheck
	if !rep.OK || !sc.OK || sc.ForgedRefused != 3 || len(sc.RebuiltBy) != len(rep.Backends) {
		t.Fatalf("self-check: %+v", rep)
	}
	if rep.Engine.Backend != bridge.BackendFallback && sc.DeltaBytes >= 1024 {
		t.Fatalf("native engine produced a %d-byte delta for 10 edits in 1 MiB", sc.DeltaBytes)
	}
	if rep.Store.Dir != store || rep.Store.Exists {
		t.Fatalf("store %+v, want %s (not existing)", rep.Store, store)
	}
}

func TestGlobalStoreFlagAndEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvStore, filepath.Join(dir, "from-env"))
	_, out, _ := run(t, "doctor", "--json")
	if !strings.Contains(out, filepath.Join(dir, "from-env")) {
		t.Fatalf("$%s not used:\n%s", EnvStore, out)
	}
	// The flag wins over the environment, before or after the command.
	for _, args := range [][]string{{"--store", dir + "/flag", "doctor", "--json"}, {"doctor", "--json", "--store", dir + "/flag"}} {
		_, out, _ := run(t, args...)
		if !strings.Contains(out, dir+"/flag") {
			t.Fatalf("%v: --store not used:\n%s", args, out)
		}
	}
	t.Setenv(EnvStore, "")
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "xdg"))
	_, out, _ = run(t, "doctor", "--json")
	if !strings.Contains(out, filepath.Join(dir, "xdg", "harness-edge")) {
		t.Fatalf("XDG_DATA_HOME not used:\n%s", out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"version", "--nope"}, {"version", "extra"}} {
		code, _, errOut := run(t, args...)
		if code != ExitUsage || !strings.Contains(errOut, "harness-edge:") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with a message", args, code, errOut)
		}
	}
}

func TestStateCheck(t *testing.T) {
	seed := filepath.Join("..", "..", "..", "..", "statefmt", "testdata", "seed-example.json")
	code, out, errOut := run(t, "state", "check", seed, "--json")
	if code != ExitOK {
		t.Fatalf("seed example refused (exit %d): %s", code, errOut)
	}
	var res StateCheck
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.SchemaVersion != 1 || res.HarnessID != "harness-abc123" || res.Status != "running" || res.Steps != 2 || res.ToolCalls != 0 {
		t.Fatalf("wrong summary: %+v", res)
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string
		want          []string
	}{
		{"v99.json", strings.Replace(string(data), `"schemaVersion": 1`, `"schemaVersion": 99`, 1), []string{"schemaVersion 99", "supported versions: 0 (migrated), 1"}},
		{"broken.json", strings.Replace(string(data), `"taskId": "p2-t1",`, `"taskId": "p2-t1",,`, 1), []string{"broken.json", "line 5"}},
		{"unknown.json", strings.Replace(string(data), `"checkpointCount": 2`, `"checkpointCount": 2, "x": 1`, 1), []string{`unknown field "x"`}},
		// Valid JSON that no harness could be in: each refused, naming the field.
		{"cycle.json", strings.Replace(string(data), `"dependencies": [],`, `"dependencies": ["step-2"],`, 1),
			[]string{"plan", "cycle", "step-1 -> step-2 -> step-1"}},
		{"self.json", strings.Replace(string(data), `"dependencies": ["step-1"],`, `"dependencies": ["step-2"],`, 1),
			[]string{"plan.steps[1].dependencies", "depends on itself"}},
		{"index.json", strings.Replace(string(data), `"currentStepIndex": 1,`, `"currentStepIndex": 999999999,`, 1),
			[]string{"currentStepIndex", "999999999", "2 steps"}},
		{"id.json", strings.Replace(string(data), `"harnessId": "harness-abc123",`, `"harnessId": "../../etc",`, 1),
			[]string{"harnessId", `"../../etc" is not a harness id`}},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := run(t, "state", "check", p)
		if code != ExitError {
			t.Errorf("%s: exit %d, want 1", c.name, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr %q does not say %q", c.name, errOut, w)
			}
		}
	}
	if code, _, _ := run(t, "state", "check", filepath.Join(dir, "missing.json")); code != ExitError {
		t.Errorf("missing file: exit %d, want 1", code)
	}
	var out2, errb bytes.Buffer
	if code := MainWithInput([]string{"state", "check", "-"}, bytes.NewReader(data), &out2, &errb); code != ExitOK || !strings.Contains(out2.String(), "harness-abc123") {
		t.Errorf("stdin: exit %d, %s%s", code, out2.String(), errb.String())
	}
}

func TestStoreCommands(t *testing.T) {
	seed := filepath.Join("..", "..", "..", "..", "statefmt", "testdata", "seed-example.json")
	a, b := t.TempDir(), t.TempDir()
	must := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := run(t, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d: %s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	must(ExitOK, "--store", a, "import", seed)
	if out := must(ExitError, "--store", a, "import", seed); !strings.Contains(out, "already exists") {
		t.Fatalf("overwrite not refused: %s", out)
	}
	// A replaced state is the harness's next checkpoint: its history goes on.
	if out := must(ExitOK, "--store", a, "import", seed, "--replace"); !strings.Contains(out, "replaced the state of harness-abc123: checkpoint 2") {
		t.Fatalf("import --replace: %s", out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(must(ExitOK, "ls", "--json", "--store", a)), &list); err != nil || len(list) != 1 || list[0]["id"] != "harness-abc123" {
		t.Fatalf("ls --json: %v %v", list, err)
	}
	var rep InspectReport
	if err := json.Unmarshal([]byte(must(ExitOK, "--store", a, "inspect", "harness-abc123", "--json")), &rep); err != nil || len(rep.Records) == 0 || rep.Records[0].Kind != "keyframe" || rep.Records[len(rep.Records)-1].Seq != 2 {
		t.Fatalf("inspect --json: %+v %v", rep, err)
	}
	must(ExitOK, "--store", a, "verify")
	must(ExitError, "--store", a, "inspect", "nope")
	// JSON export reads back as the same state; a chain export moves the harness to another store.
	exported := must(ExitOK, "--store", a, "export", "harness-abc123")
	orig, _ := os.ReadFile(seed)
	s1, err1 := statefmt.DecodeJSON(orig)
	s2, err2 := statefmt.DecodeJSON([]byte(exported))
	if err1 != nil || err2 != nil || !reflect.DeepEqual(s1, s2) {
		t.Fatalf("export differs from the imported state: %v %v", err1, err2)
	}
	// The seed lists a sub-agent the store does not hold: the family is incomplete, so it
	// does not move, and no half-written file is left.
	chain := filepath.Join(t.TempDir(), "h.chain")
	if out := must(ExitError, "--store", a, "export", "harness-abc123", "--chain", "-o", chain); !strings.Contains(out, "lists sub-agent harness-def456, which the store does not hold") {
		t.Fatalf("export of an incomplete family: %s", out)
	}
	if _, err := os.Stat(chain); !os.IsNotExist(err) {
		t.Fatalf("a refused export left %s: %v", chain, err)
	}
	alone := filepath.Join(t.TempDir(), "alone.json")
	if err := os.WriteFile(alone, bytes.Replace(orig, []byte(`"subAgentIds": ["harness-def456"]`), []byte(`"subAgentIds": []`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	must(ExitOK, "--store", a, "import", alone, "--replace")
	exported = must(ExitOK, "--store", a, "export", "harness-abc123")
	must(ExitOK, "--store", a, "export", "harness-abc123", "--chain", "-o", chain)
	must(ExitOK, "--store", b, "import", chain)
	if out := must(ExitOK, "--store", b, "export", "harness-abc123"); out != exported {
		t.Fatal("chain import does not export the same state")
	}
}
