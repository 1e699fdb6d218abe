package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// post sends body to the daemon's HTTP API and returns the status and the error message.
func post(t *testing.T, base, tok, path string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error
}

// overLimit is a task file (or plan change) one byte over task.MaxFileSize: a YAML comment.
func overLimit() string {
	return "# " + strings.Repeat("x", task.MaxFileSize-2) + "\n"
}

// A task file over the 4 MiB limit is refused by the daemon's HTTP API with 413, whether its
// body fits the API's 25 MiB or not, with the message `submit` gives for the file, and nothing
// is created; a plan change over the limit is refused alike and leaves the plan as it was.
func TestTheAPIAnswers413ForATaskFileOrAPlanChangeOverTheLimit(t *testing.T) {
	base, tok, api := daemonWithHTTP(t)
	ctx := context.Background()
	const limit = "over the 4 MiB (4194304 bytes) a task file may be"

	// The message `submit` gives, refusing the file before anything is sent.
	file := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(file, []byte(overLimit()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, cliErr := task.ReadFile(file)
	if cliErr == nil || !strings.Contains(cliErr.Error(), limit) {
		t.Fatalf("reading the file: %v", cliErr)
	}

	body, _ := json.Marshal(control.SubmitRequest{Task: overLimit() + "\n", Name: file})
	code, msg := post(t, base, tok, "/v1/harnesses", body)
	if code != http.StatusRequestEntityTooLarge || msg != cliErr.Error() {
		t.Fatalf("a task file over the limit: %d %q\nwant 413 %q", code, msg, cliErr)
	}
	huge := append([]byte(`{"task": "`), bytes.Repeat([]byte("x"), control.MaxBody)...)
	code, msg = post(t, base, tok, "/v1/harnesses", append(huge, `"}`...))
	if want := "the submitted task: the task file is more than 4194304 bytes, " + limit + ": the request body is larger than the API takes (26214400 bytes, 25 MiB)"; code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(msg, want) {
		t.Fatalf("a body over %d bytes: %d %q\nwant 413 %q", control.MaxBody, code, msg, want)
	}
	if _, err := api.Submit(ctx, control.Submission{Task: []byte(overLimit()), Name: "big.yaml"}); !errors.Is(err, task.ErrTooLarge) {
		t.Fatalf("the client is not told the task is too large: %v", err)
	}
	if l, err := api.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("a refused task made harnesses: %v %v", l, err)
	}

	// A failed harness to replan.
	id, err := api.Submit(ctx, control.Submission{Name: "f.yaml", Task: []byte(`id: f
agent: A
workspace: ` + t.TempDir() + `
agents:
  A:
    driver: script
    script:
      plan:
        - {id: a, description: breaks, agent: A}
      steps:
        a: [{fail: permanent, message: broken}]
`)})
	if err != nil {
		t.Fatal(err)
	}
	var before *statefmt.HarnessState
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if before, err = api.State(ctx, id); err == nil && before.Status == statefmt.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("f never failed: %v", err)
		}
	}
	// The API's message is the one `replan` gives for the file.
	body, _ = json.Marshal(control.ReplanRequest{Change: overLimit(), Name: "fix.yaml"})
	code, msg = post(t, base, tok, "/v1/harnesses/f/replan", body)
	if want := "harness f is unchanged: fix.yaml: the plan change is 4194305 bytes, over the 4 MiB (4194304 bytes) a plan change may be, as a task file: split it into smaller changes"; code != http.StatusRequestEntityTooLarge || msg != want {
		t.Fatalf("a plan change over the limit: %d %q\nwant 413 %q", code, msg, want)
	}
	huge = append([]byte(`{"change": "`), bytes.Repeat([]byte("x"), control.MaxBody)...)
	code, msg = post(t, base, tok, "/v1/harnesses/f/replan", append(huge, `"}`...))
	if want := "harness f is unchanged: the plan change: the plan change is more than 4194304 bytes, over the 4 MiB (4194304 bytes) a plan change may be"; code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(msg, want) {
		t.Fatalf("a body over %d bytes: %d %q\nwant 413 %q", control.MaxBody, code, msg, want)
	}
	after, err := api.State(ctx, id)
	if err != nil || after.CheckpointCount != before.CheckpointCount || after.StatusReason != before.StatusReason {
		t.Fatalf("a refused plan change changed the harness: %v", err)
	}
}
