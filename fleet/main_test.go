package fleet_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/internal/reexec"
)

// envHub makes the test binary a hub process with JetStream in the directory it names.
const envHub = "HARNESS_EDGE_FLEET_TEST_HUB"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHub); dir != "" {
		h, err := fleet.StartHub(fleet.HubConfig{Dir: dir, Listen: "127.0.0.1:0"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(h.URL())
		select {} // until killed
	}
	os.Exit(m.Run())
}

// hubProcess starts a hub in a child process and returns its URL; it is killed (SIGKILL) at
// the end of the test.
func hubProcess(tb testing.TB) string {
	tb.Helper()
	u, _ := hubProcessPID(tb)
	return u
}

// hubProcessPID is hubProcess, and the hub's process id.
func hubProcessPID(tb testing.TB) (string, int) {
	tb.Helper()
	cmd := reexec.Command(envHub, tb.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
	}()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "nats://") {
			tb.Fatalf("the hub process says %q", u)
		}
		return u, cmd.Process.Pid
	case <-time.After(30 * time.Second):
		tb.Fatal("the hub process did not start")
		return "", 0
	}
}
