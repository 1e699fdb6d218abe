package control

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store/trust"
)

func TestCheckBind(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8484", "[::1]:80", "localhost:1", "127.0.0.1:0"} {
		if err := CheckBind(ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, remote := range []string{"0.0.0.0:8484", "192.168.1.5:80", ":8484", "example.com:80"} {
		err := CheckBind(remote, false)
		if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("%s: %v", remote, err)
		}
		if err := CheckBind(remote, true); err != nil {
			t.Errorf("%s with --allow-remote: %v", remote, err)
		}
	}
	if err := CheckBind("8484", true); err == nil {
		t.Error("an address without a port was accepted")
	}
}

func TestTokenIsMadeOnceWithMode0600(t *testing.T) {
	dir := t.TempDir()
	a, err := Token(dir)
	if err != nil || len(a) != 64 {
		t.Fatalf("%q %v", a, err)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi.Mode(), err)
	}
	if b, err := Token(dir); err != nil || b != a {
		t.Fatalf("second call: %q %v", b, err)
	}
	os.WriteFile(filepath.Join(dir, TokenName), []byte("short\n"), 0o600)
	if _, err := Token(dir); err == nil {
		t.Fatal("a too-short token was used")
	}
}

func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if _, err := ListenSocket(dir); err == nil || !strings.Contains(err.Error(), "shorter store directory") {
		t.Fatalf("%v", err)
	}
}

// otherUID is a uid that is not ours; giving a file to it needs root.
const otherUID = 54321

func TestTokenRefusesAPlantedOrOpenTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TokenName)
	planted := strings.Repeat("ab", 32)
	check := func(name string, want string) {
		t.Helper()
		tok, err := Token(dir)
		if err == nil || !errors.Is(err, trust.ErrUntrusted) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: token %q, %v; want a refusal saying %q", name, tok, err, want)
		}
	}

	// Readable by others (the tester's 0644): refused, even when it is ours.
	os.WriteFile(path, []byte(planted+"\n"), 0o600)
	os.Chmod(path, 0o644)
	check("a 0644 token", "other users can read it")

	// A symbolic link: not followed, its target untouched.
	os.Remove(path)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(planted+"\n"), 0o600)
	os.Symlink(target, path)
	check("a symlinked token", "symbolic link")

	// A hard link to another file.
	os.Remove(path)
	os.Link(target, path)
	check("a hard-linked token", "hard links")
	os.Remove(path)

	if os.Geteuid() == 0 {
		// Another user's token, 0600 as it should be: refused.
		os.WriteFile(path, []byte(planted+"\n"), 0o600)
		os.Chown(path, otherUID, otherUID)
		check("another user's token", "belongs to uid 54321")
		os.Remove(path)

		// A directory another user owns: no token is read from it or made in it.
		theirs := filepath.Join(t.TempDir(), "theirs")
		os.Mkdir(theirs, 0o700)
		os.WriteFile(filepath.Join(theirs, TokenName), []byte(planted+"\n"), 0o600)
		os.Chown(theirs, otherUID, otherUID)
		if tok, err := Token(theirs); err == nil || !errors.Is(err, trust.ErrUntrusted) {
			t.Fatalf("a token in another user's directory: %q %v", tok, err)
		}
	} else {
		t.Log("not root: the cases of another user's files are skipped")
	}

	// Once the bad file is gone a new one is made, 0600, and used.
	a, err := Token(dir)
	if err != nil || a == planted {
		t.Fatalf("%q %v", a, err)
	}
	if b, err := Token(dir); err != nil || b != a {
		t.Fatalf("%q %v", b, err)
	}
}

func TestTokenIsNotMadeInAWorldWritableDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	os.Mkdir(dir, 0o700)
	os.Chmod(dir, 0o777)
	if tok, err := Token(dir); err == nil || !errors.Is(err, trust.ErrUntrusted) {
		t.Fatalf("%q %v", tok, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, TokenName)); !os.IsNotExist(err) {
		t.Fatalf("a token was made: %v", err)
	}
}

func TestConnectTalksToNoSocketInADirectoryOthersCanWrite(t *testing.T) {
	// Someone else's "owner" answers on control.sock in a directory anyone can write to: no
	// request (a task, a token-free operation) may go to it.
	dir := filepath.Join(t.TempDir(), "open")
	os.Mkdir(dir, 0o700)
	l, err := net.Listen("unix", SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 10)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r.URL.Path
		w.Write([]byte(`{"ok":true,"owner":"daemon","pid":1}`))
	})}
	go srv.Serve(l)
	defer srv.Close()
	os.Chmod(dir, 0o777)
	c, err := Connect(dir)
	if err == nil {
		c.Close()
	}
	if err == nil || !errors.Is(err, trust.ErrUntrusted) {
		t.Fatalf("Connect: %v", err)
	}
	if len(asked) != 0 {
		t.Fatalf("the planted socket was asked %s", <-asked)
	}
}

// A harness waiting at many gates (its sub-agents' included) is told about ten of them, with
// the commands that answer each, and how many more wait.
func TestGateHintNamesTenGatesAndCountsTheRest(t *testing.T) {
	var gates []harness.PendingGate
	for i := range 25 {
		gates = append(gates, harness.PendingGate{HarnessID: fmt.Sprintf("p.s%d", i), Gate: statefmt.Gate{ID: "g1", Kind: harness.GateStep, StepID: "ship"}})
	}
	hint := GateHint("p", gates)
	if strings.Count(hint, "waits for a human") != 10 || strings.Contains(hint, "p.s10/") ||
		!strings.HasSuffix(hint, "`harness-edge resume p` and 15 more gates waiting too (`harness-edge report` lists them all)") {
		t.Fatalf("hint (%d bytes): %s", len(hint), hint)
	}
	if hint := GateHint("p", gates[:2]); strings.Contains(hint, "more") || strings.Count(hint, "waits for a human") != 2 {
		t.Fatalf("two gates: %s", hint)
	}
}
