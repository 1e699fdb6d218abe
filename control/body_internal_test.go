package control

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// submitAPI answers health and keeps what is submitted to it.
type submitAPI struct {
	API
	got chan Submission
}

func (submitAPI) Health(context.Context) (Health, error) {
	return Health{OK: true, Version: "test", Owner: OwnerDaemon}, nil
}

func (a submitAPI) Submit(_ context.Context, s Submission) (string, error) {
	a.got <- s
	return "big", nil
}

// TestTheAPITakesATaskFileAtItsSizeLimitHoweverJSONEscapesIt: a task file of
// task.MaxFileSize bytes, each of which JSON writes in six (control characters, <, > and &),
// with a name and a directory of PATH_MAX bytes escaped alike, is submitted whole through the
// HTTP API; a body over MaxBody is refused with 413 and a message that gives the limit.
func TestTheAPITakesATaskFileAtItsSizeLimitHoweverJSONEscapesIt(t *testing.T) {
	api := submitAPI{got: make(chan Submission, 1)}
	addr, _ := serveTest(t, api, HTTPLimits)
	c := NewHTTPClient("http://"+addr, "tok")
	data := bytes.Repeat([]byte("\x01<&>"), task.MaxFileSize/4)
	name, dir := strings.Repeat("<", 4096), "/"+strings.Repeat("&", 4095)
	id, err := c.Submit(context.Background(), Submission{Task: data, Name: name, Dir: dir})
	if err != nil || id != "big" {
		t.Fatalf("submit of a task file of %d bytes: %q, %v", len(data), id, err)
	}
	if s := <-api.got; !bytes.Equal(s.Task, data) || s.Name != name || s.Dir != dir {
		t.Fatalf("the API got a task of %d bytes named %d bytes in %d bytes, want %d, %d, %d", len(s.Task), len(s.Name), len(s.Dir), len(data), len(name), len(dir))
	}

	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/harnesses", bytes.NewReader(bytes.Repeat([]byte(" "), MaxBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b.String(), "(26214400 bytes, 25 MiB)") {
		t.Fatalf("a body over the limit: %s %s", resp.Status, b.String())
	}
	select {
	case s := <-api.got:
		t.Fatalf("a refused body reached the API: %d bytes", len(s.Task))
	default:
	}
}

// unquoteBytes reads a JSON string as encoding/json does (escapes, surrogate pairs, a lone
// surrogate as U+FFFD) and keeps each byte that is not UTF-8 as it was sent.
func TestUnquoteBytesReadsJSONStringsKeepingBytesThatAreNotUTF8(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\tquote\"back\\slash/\b\f\r\n", "\x01<&>\u2028", "Café ☕ 𝄞", `\u`} {
		lit, _ := json.Marshal(s)
		got, ok := unquoteBytes(lit)
		if !ok || string(got) != s {
			t.Errorf("%s: %q %v, want %q", lit, got, ok, s)
		}
	}
	for lit, want := range map[string]string{`"\ud834\udd1e"`: "𝄞", `"\ud834x"`: "\ufffdx", `"\u00e9\/"`: "é/", "\"caf\xe9\\n\"": "caf\xe9\n"} {
		if got, ok := unquoteBytes([]byte(lit)); !ok || string(got) != want {
			t.Errorf("%s: %q %v, want %q", lit, got, ok, want)
		}
	}
	for _, bad := range []string{``, `"`, `"\`, `"\q"`, `"\u12"`, `x"`} {
		if _, ok := unquoteBytes([]byte(bad)); ok {
			t.Errorf("%s was read as a JSON string", bad)
		}
	}
}
