package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/harness-edge/harness-edge/store"
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

	if code, text := postSubmit(t, addr, bytes.Repeat([]byte(" "), MaxBody+1)); code != http.StatusRequestEntityTooLarge || !strings.Contains(text, "(26214400 bytes, 25 MiB)") {
		t.Fatalf("a body over the limit: %d %s", code, text)
	}
	select {
	case s := <-api.got:
		t.Fatalf("a refused body reached the API: %d bytes", len(s.Task))
	default:
	}
}

// A body that is not UTF-8 (a Latin-1 task file put in a JSON string as it is) is refused with
// 400 naming the first bad byte and its offset: encoding/json would read the byte as U+FFFD,
// and the task would be taken with its text changed.
func TestTheAPIRefusesABodyThatIsNotUTF8NamingTheByte(t *testing.T) {
	api := submitAPI{got: make(chan Submission, 1)}
	addr, _ := serveTest(t, api, HTTPLimits)
	body := []byte("{\"name\": \"l1.yaml\", \"task\": \"id: l1\\nprompt: caf\xe9\\n\"}")
	want := fmt.Sprintf("the request body is not UTF-8: the byte 0xE9 at byte offset %d", bytes.IndexByte(body, 0xe9))
	if code, text := postSubmit(t, addr, body); code != http.StatusBadRequest || !strings.Contains(text, want) {
		t.Fatalf("a body that is not UTF-8: %d %s\nwant 400 %q", code, text, want)
	}
	select {
	case s := <-api.got:
		t.Fatalf("a refused body reached the API: %q", s.Task)
	default:
	}
}

// A body whose JSON escapes half a surrogate pair (\ud800 alone), which no UTF-8 text holds,
// is refused like a body that is not UTF-8: encoding/json would read it as U+FFFD. A whole pair,
// and the text \ud800 itself (its backslash escaped), are taken as they are.
func TestTheAPIRefusesAnEscapedHalfOfASurrogatePair(t *testing.T) {
	api := submitAPI{got: make(chan Submission, 1)}
	addr, _ := serveTest(t, api, HTTPLimits)
	for _, half := range []string{`\ud800`, `\uDFFF`, `\ud800\u0041`, `\ud800\ud800`} {
		body := []byte(`{"task": "id: l1\nprompt: caf` + half + `"}`)
		want := fmt.Sprintf("the request body is not UTF-8: the escape \\%s at byte offset %d", half[:6], bytes.IndexByte(body, 'f')+1) // as JSON writes it
		if code, text := postSubmit(t, addr, body); code != http.StatusBadRequest || !strings.Contains(text, want) {
			t.Fatalf("%s: %d %s\nwant 400 %q", body, code, text, want)
		}
		select {
		case s := <-api.got:
			t.Fatalf("a refused body reached the API: %q", s.Task)
		default:
		}
	}
	for body, want := range map[string]string{`{"task": "a\ud83d\ude00"}`: "a\U0001F600", `{"task": "a\\ud800"}`: `a\ud800`} {
		if code, text := postSubmit(t, addr, []byte(body)); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", body, code, text)
		}
		if s := <-api.got; string(s.Task) != want {
			t.Fatalf("%s: the API got %q, want %q", body, s.Task, want)
		}
	}
}

// postSubmit posts body to the submit endpoint as it is, with the test token.
func postSubmit(t *testing.T, addr string, body []byte) (int, string) {
	t.Helper()
	return send(t, http.MethodPost, "http://"+addr+"/v1/harnesses", body)
}

// send sends a request with the test token and returns the answer's status and body.
func send(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
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
	return resp.StatusCode, b.String()
}

// refusingAPI refuses every submission as bad input.
type refusingAPI struct{ submitAPI }

func (refusingAPI) Submit(context.Context, Submission) (string, error) {
	return "", badInput("plan: a dependency cycle: s1 -> s2 -> s1 (<b> & \"c\")")
}

// A refused request's message reaches the client as the server words it: no prefix, and the
// text as it is in the JSON (no \u003e for >), which browsers are told not to sniff as HTML.
func TestABadInputMessageReachesTheClientAsWorded(t *testing.T) {
	addr, _ := serveTest(t, refusingAPI{}, HTTPLimits)
	want := `plan: a dependency cycle: s1 -> s2 -> s1 (<b> & "c")`
	_, err := NewHTTPClient("http://"+addr, "tok").Submit(context.Background(), Submission{Task: []byte("id: x")})
	if err == nil || err.Error() != want || !errors.Is(err, ErrBadInput) {
		t.Fatalf("%v (bad input: %v), want %q", err, errors.Is(err, ErrBadInput), want)
	}
	code, text := postSubmit(t, addr, []byte(`{"task": "id: x"}`))
	if code != http.StatusBadRequest || !strings.Contains(text, `s1 -> s2 -> s1 (<b> & \"c\")`) {
		t.Fatalf("%d %s", code, text)
	}
}

// A yes-or-no query parameter takes 1 or true, 0 or false: anything else is refused before the
// API is asked (follow=yes used to give a list where a stream was meant, without a word).
func TestAYesOrNoParameterTakesOneOrZeroOnly(t *testing.T) {
	addr, _ := serveTest(t, submitAPI{}, HTTPLimits)
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/v1/harnesses/h/events?follow=yes", `follow="yes": want 1 or 0`},
		{http.MethodGet, "/v1/harnesses/h/logs?follow=on", `follow="on": want 1 or 0`},
		{http.MethodDelete, "/v1/harnesses/h?force=maybe", `force="maybe": want 1 or 0`},
	} {
		code, text := send(t, c.method, "http://"+addr+c.path, nil)
		var body struct{ Error string }
		err := json.Unmarshal([]byte(text), &body)
		if err != nil || code != http.StatusBadRequest || body.Error != c.want {
			t.Errorf("%s %s: %d %q (%v), want 400 with %q", c.method, c.path, code, body.Error, err, c.want)
		}
	}
}

// A request about a harness whose id is empty or impossible gets the store's message for a bad
// id (400), as the same command without a daemon does, not "no endpoint".
func TestAnEmptyOrImpossibleHarnessIDIsABadIDOverHTTP(t *testing.T) {
	addr, _ := serveTest(t, submitAPI{}, HTTPLimits)
	for _, c := range []struct{ method, path, id string }{
		{http.MethodDelete, "/v1/harnesses/", ""},
		{http.MethodGet, "/v1/harnesses/", ""},
		{http.MethodPost, "/v1/harnesses/a%20b/retry", "a b"},
	} {
		code, text := send(t, c.method, "http://"+addr+c.path, nil)
		if want := store.ValidID(c.id).Error(); code != http.StatusBadRequest || !strings.Contains(text, strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("%s %s: %d %s; want 400 with %q", c.method, c.path, code, text, want)
		}
	}
	// The client does not send what the server's router would clean (an empty id, ".."): it
	// gives the same message itself.
	cl := NewHTTPClient("http://"+addr, "tok")
	ctx := context.Background()
	for _, id := range []string{"", "..", "a/b"} {
		_, derr := cl.Delete(ctx, id, false)
		_, rerr := cl.Retry(ctx, id, RetryRequest{})
		for _, err := range []error{derr, rerr, cl.Pause(ctx, id)} {
			if !errors.Is(err, store.ErrInvalidID) || err.Error() != store.ValidID(id).Error() {
				t.Errorf("id %q: %v", id, err)
			}
		}
	}
}
