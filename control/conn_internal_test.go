package control

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An owner that takes the connection and never answers (busy, or hung) is named as such, with
// what to do, instead of a bare "context deadline exceeded".
func TestAnOwnerThatDoesNotAnswerIsNamedWithWhatToDo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	saved := dialWait
	dialWait = 200 * time.Millisecond
	defer func() { dialWait = saved }()
	_, err = Connect(dir)
	if err == nil || !strings.Contains(err.Error(), "did not answer on its control socket within 200ms") || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("connecting to an owner that does not answer: %v", err)
	}
}
