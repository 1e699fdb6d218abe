package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
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
	if code != ExitOK || !strings.Contains(out, "engine:") || !strings.Contains(out, "(ABI 1)") {
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
