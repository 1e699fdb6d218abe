package bridge_test

import (
	"os"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/enginetest"
)

// TestConformance runs the shared suite against every backend this build can load; each
// backend's deltas are also applied by all the others.
func TestConformance(t *testing.T) {
	engines, errs := bridge.Available()
	for _, err := range errs {
		t.Logf("not in this run: %v", err)
	}
	for i, e := range engines {
		var peers []bridge.Engine
		for j, p := range engines {
			if j != i {
				peers = append(peers, p)
			}
		}
		t.Run(string(e.Backend()), func(t *testing.T) { enginetest.Run(t, e, peers) })
	}
}

// TestLoadChoosesExpectedBackend makes the backend choice an assertion: `make test` runs the Go
// tests three times and says through HARNESS_EDGE_EXPECT_BACKEND which backend each run must get.
func TestLoadChoosesExpectedBackend(t *testing.T) {
	e, warns := bridge.Load()
	if want := os.Getenv("HARNESS_EDGE_EXPECT_BACKEND"); want != "" && string(e.Backend()) != want {
		t.Fatalf("Load chose %s, this run expects %s (warnings: %v)", e.Backend(), want, warns)
	}
	if e.Backend() == bridge.BackendFallback {
		if len(warns) != 1 || warns[0].Code != bridge.WarnEngineUnavailable {
			t.Fatalf("fallback without an engine_unavailable warning: %v", warns)
		}
		for _, part := range []string{"cgo backend", "purego backend", "keyframe-only"} {
			if !strings.Contains(warns[0].Message, part) {
				t.Errorf("warning does not say %q: %s", part, warns[0].Message)
			}
		}
	} else if len(warns) != 0 {
		t.Fatalf("engine %s loaded but warnings were returned: %v", e.Backend(), warns)
	}
}

func TestStatusStringsAreStable(t *testing.T) {
	for st, want := range map[bridge.Status]string{
		bridge.StatusOK: "ok", bridge.StatusNullParameter: "null parameter",
		bridge.StatusInvalidDelta: "invalid delta", bridge.StatusBaseMismatch: "base mismatch",
		bridge.StatusTooLarge: "too large", bridge.StatusPanic: "engine panic", bridge.Status(77): "status 77",
	} {
		if st.String() != want {
			t.Errorf("Status(%d).String() = %q, want %q", uint32(st), st.String(), want)
		}
	}
}
