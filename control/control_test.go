package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
