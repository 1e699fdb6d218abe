//go:build !cgo || eternal_purego

package bridge_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
)

// buildLib compiles C source into a shared library in a temporary directory.
func buildLib(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "lib.c")
	so := filepath.Join(dir, "libfake.so")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, c).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc (a build dependency of harness-edge) failed: %v\n%s", err, out)
	}
	return so
}

func TestPuregoListsEveryMissingSymbol(t *testing.T) {
	so := buildLib(t, `
#include <stdint.h>
uint32_t eternal_abi_version(void) { return 1; }
uint32_t eternal_hash64(const uint8_t *p, unsigned long n, uint64_t *out) { *out = 0; return 0; }
`)
	_, err := bridge.OpenPurego(so)
	if err == nil {
		t.Fatal("a library lacking symbols was accepted")
	}
	msg := err.Error()
	for _, want := range []string{so, "lacks 13 symbol(s)", "eternal_chain_append", "eternal_live_buffers", "eternal_buffer_free",
		"eternal_encoder_new", "eternal_encoder_free", "eternal_delta_encode", "eternal_delta_check", "eternal_delta_apply"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q: %s", want, msg)
		}
	}
}

func TestPuregoRefusesWrongABIVersion(t *testing.T) {
	names := []string{"eternal_live_buffers", "eternal_buffer_free", "eternal_encoder_new",
		"eternal_encoder_free", "eternal_delta_encode", "eternal_delta_check", "eternal_delta_apply", "eternal_hash64",
		"eternal_chain_new", "eternal_chain_free", "eternal_chain_append", "eternal_chain_push", "eternal_chain_head", "eternal_chain_state"}
	src := "#include <stdint.h>\nuint32_t eternal_abi_version(void) { return 99; }\n"
	for _, n := range names {
		src += "int " + n + "(void) { return 0; }\n"
	}
	_, err := bridge.OpenPurego(buildLib(t, src))
	if err == nil || !strings.Contains(err.Error(), "ABI version 99, this build needs "+strconv.Itoa(int(bridge.ABIVersion))) {
		t.Fatalf("wrong ABI accepted or unclear error: %v", err)
	}
}

func TestPuregoRefusesNonLibrary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libeternal.so")
	if err := os.WriteFile(p, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := bridge.OpenPurego(p)
	if err == nil || !strings.Contains(err.Error(), "cannot load "+p) {
		t.Fatalf("non-library accepted or unclear error: %v", err)
	}
}

func TestPuregoNamedLibraryIsTheOnlyCandidate(t *testing.T) {
	t.Setenv(bridge.EnvEngineLib, "/nonexistent/libeternal.so")
	if c := bridge.LibraryCandidates(); len(c) != 1 || c[0] != "/nonexistent/libeternal.so" {
		t.Fatalf("candidates %v: a named library must be the only one tried", c)
	}
	_, err := bridge.OpenPurego("")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libeternal.so: not found") {
		t.Fatalf("missing named library: %v", err)
	}
	if strings.Count(err.Error(), "purego backend") != 1 {
		t.Fatalf("error repeats its prefix: %v", err)
	}
}
