package responsestest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// An agent turn (a request with tools) streams the script's reply as the Responses API does,
// ending with response.completed and its usage; requests without tools get a text with no
// usage, other paths 404, and a turn past the script 500; every request is recorded.
func TestServerStreamsTheScriptToAgentTurnsOnly(t *testing.T) {
	s := New(Call("exec_command", map[string]any{"cmd": "true"}, Usage{InputTokens: 10, CachedInputTokens: 6, OutputTokens: 3}))
	defer s.Close()
	turn := `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[]}`

	resp := post(t, s.URL+"/v1/responses", turn)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var names []string
	var last map[string]any
	var call map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			names = append(names, name)
		} else if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(d), &last); err != nil || last["type"] != names[len(names)-1] {
				t.Fatalf("data %q: %v", d, err)
			}
			if last["type"] == "response.output_item.done" {
				call = last["item"].(map[string]any)
			}
		}
	}
	want := "response.created response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	if call["type"] != "function_call" || call["name"] != "exec_command" || call["arguments"] != `{"cmd":"true"}` || call["call_id"] == "" {
		t.Fatalf("the call %v", call)
	}
	u := last["response"].(map[string]any)["usage"].(map[string]any)
	if u["input_tokens"] != 10.0 || u["output_tokens"] != 3.0 || u["input_tokens_details"].(map[string]any)["cached_tokens"] != 6.0 {
		t.Fatalf("usage %v", u)
	}

	var side map[string]any
	if err := json.NewDecoder(post(t, s.URL+"/v1/responses", `{"model":"m","input":[]}`).Body).Decode(&side); err != nil {
		t.Fatal(err)
	}
	if u := side["usage"].(map[string]any); side["status"] != "completed" || u["input_tokens"] != 0.0 || u["output_tokens"] != 0.0 {
		t.Fatalf("a request without tools got %v", side)
	}
	if r := post(t, s.URL+"/v1/models", ""); r.StatusCode != 404 {
		t.Fatalf("an unknown path: %d", r.StatusCode)
	}
	if r := post(t, s.URL+"/v1/responses", turn); r.StatusCode != 500 {
		t.Fatalf("a turn past the script: %d", r.StatusCode)
	}
	if r := post(t, s.URL+"/v1/responses", "{"); r.StatusCode != 400 {
		t.Fatalf("a body that is not JSON: %d", r.StatusCode)
	}
	if n := len(s.Requests()); n != 5 || s.Turns() != 2 || !strings.Contains(s.Log(), "POST /v1/models") {
		t.Fatalf("%d requests recorded, %d turns:\n%s", n, s.Turns(), s.Log())
	}
}
