package anthropictest

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

// events reads a server-sent event stream: each event's name and decoded data.
func events(t *testing.T, resp *http.Response) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("data %q: %v", d, err)
			}
			if m["type"] != names[len(names)-1] {
				t.Fatalf("event %s has data of type %v", names[len(names)-1], m["type"])
			}
			data = append(data, m)
		}
	}
	return names, data
}

// An agent turn (a request with tools) streams the script's reply as the Messages API does: the
// tool call's input in pieces that join to its JSON, the usage split between message_start
// (input) and message_delta (output). Requests without tools get a text with no usage, other
// paths 404, and a turn past the script 500; every request is recorded.
func TestServerStreamsTheScriptToAgentTurnsOnly(t *testing.T) {
	s := New(ToolUse("Write", map[string]any{"file_path": "/w/a.txt", "content": "x"}, Usage{InputTokens: 10, OutputTokens: 3, CacheReadInputTokens: 4}))
	defer s.Close()
	turn := `{"model":"m","stream":true,"tools":[{"name":"Write"}],"messages":[]}`

	resp := post(t, s.URL+"/v1/messages", turn)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	names, data := events(t, resp)
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	start := data[0]["message"].(map[string]any)
	if u := start["usage"].(map[string]any); u["input_tokens"] != 10.0 || u["cache_read_input_tokens"] != 4.0 {
		t.Fatalf("message_start usage %v", u)
	}
	if b := data[2]["content_block"].(map[string]any); b["type"] != "tool_use" || b["name"] != "Write" || !strings.HasPrefix(b["id"].(string), "toolu_") {
		t.Fatalf("content_block_start %v", b)
	}
	input := data[3]["delta"].(map[string]any)["partial_json"].(string) + data[4]["delta"].(map[string]any)["partial_json"].(string)
	if input != `{"content":"x","file_path":"/w/a.txt"}` {
		t.Fatalf("the input's pieces join to %s", input)
	}
	if d := data[6]; d["delta"].(map[string]any)["stop_reason"] != "tool_use" || d["usage"].(map[string]any)["output_tokens"] != 3.0 {
		t.Fatalf("message_delta %v", d)
	}

	var side map[string]any
	if err := json.NewDecoder(post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`).Body).Decode(&side); err != nil {
		t.Fatal(err)
	}
	if u := side["usage"].(map[string]any); side["stop_reason"] != "end_turn" || u["input_tokens"] != 0.0 || u["output_tokens"] != 0.0 {
		t.Fatalf("a request without tools got %v", side)
	}
	if r := post(t, s.URL+"/v1/models", ""); r.StatusCode != 404 {
		t.Fatalf("an unknown path: %d", r.StatusCode)
	}
	if r := post(t, s.URL+"/v1/messages", turn); r.StatusCode != 500 {
		t.Fatalf("a turn past the script: %d", r.StatusCode)
	}
	if r := post(t, s.URL+"/v1/messages", "{"); r.StatusCode != 400 {
		t.Fatalf("a body that is not JSON: %d", r.StatusCode)
	}
	if n := len(s.Requests()); n != 5 || s.Turns() != 2 || !strings.Contains(s.Log(), "POST /v1/models") {
		t.Fatalf("%d requests recorded, %d turns:\n%s", n, s.Turns(), s.Log())
	}
}
