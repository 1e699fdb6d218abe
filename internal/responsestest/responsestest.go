// Package responsestest is a scripted OpenAI Responses API server for tests that run the real
// Codex CLI (which speaks only that API to a model provider): real HTTP on a loopback port,
// POST /v1/responses answered (streamed as server-sent events when the request asks for it, one
// JSON response otherwise) from a script of replies, every other path 404. It records every
// request it gets, so a failing test can print what the CLI asked for.
//
// Only the requests that offer the model tools (the agent's turns) are answered from the script;
// any other gets a short text with zero usage, so that what the CLI reports adds up to the
// script's usage and nothing else.
package responsestest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/harness-edge/harness-edge/internal/scripted"
)

// Item is one output item of a reply: a message text, or a call of a function tool (Function
// and Arguments set; Arguments is the JSON text of the arguments).
type Item struct {
	Text      string
	Function  string
	Arguments string
}

// Usage is the token use a reply reports.
type Usage struct {
	InputTokens       int64
	CachedInputTokens int64 // of InputTokens, those read from the cache
	OutputTokens      int64
}

// Reply is one scripted answer to an agent turn.
type Reply struct {
	Items []Item
	Usage Usage
}

// Text is a reply of one message.
func Text(text string, u Usage) Reply { return Reply{Items: []Item{{Text: text}}, Usage: u} }

// Call is a reply of one function call; args is marshalled to its JSON arguments.
func Call(function string, args any, u Usage) Reply {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return Reply{Items: []Item{{Function: function, Arguments: string(b)}}, Usage: u}
}

// Request is one request the server got, as it came.
type Request = scripted.Request

// Server is the scripted server. Its Script has the requests it got (Requests) and how many
// agent turns it answered (Turns).
type Server struct {
	*httptest.Server
	*scripted.Script[Reply]
}

// New starts a server on a loopback port answering agent turns from script, in order. A turn
// past the script's end is answered 500 with what happened.
func New(script ...Reply) *Server {
	s := &Server{Script: scripted.New(script)}
	s.Server = httptest.NewServer(s)
	return s
}

// ToolNames is the names of the tools a request offered.
func ToolNames(r Request) []string {
	var m responsesRequest
	_ = json.Unmarshal(r.Body, &m)
	var names []string
	for _, t := range m.Tools {
		names = append(names, t.Name+"("+t.Type+")")
	}
	return names
}

// Log is the requests, one a line (method, path, model, stream, tools, and the turn they got),
// for a test's failure message.
func (s *Server) Log() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		var m responsesRequest
		_ = json.Unmarshal(r.Body, &m)
		fmt.Fprintf(&b, "%s %s model=%q stream=%v tools=%v turn=%d body=%d bytes\n", r.Method, r.Path, m.Model, m.Stream, ToolNames(r), r.Turn, len(r.Body))
	}
	return b.String()
}

type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := scripted.Capture(r)
	body := rec.Body
	var m responsesRequest
	isResponses := r.Method == http.MethodPost && r.URL.Path == "/v1/responses"
	if isResponses {
		if err := json.Unmarshal(body, &m); err != nil {
			s.Record(rec)
			writeError(w, http.StatusBadRequest, "the body is not JSON: "+err.Error())
			return
		}
	}
	reply, n, ok := s.Take(rec, isResponses && len(m.Tools) > 0)
	overrun := !ok
	if isResponses && len(m.Tools) == 0 {
		reply = Text("OK", Usage{})
	}
	id := fmt.Sprintf("resp_%04d", n)

	switch {
	case !isResponses:
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	case overrun:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("the script has %d replies and this is agent turn %d", s.Len(), s.Len()+1))
	case m.Stream:
		stream(w, id, m.Model, reply)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response(id, m.Model, reply, "completed"))
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func items(id string, r Reply) []any {
	out := []any{}
	for i, it := range r.Items {
		if it.Function != "" {
			out = append(out, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", id, i), "call_id": fmt.Sprintf("call_%s_%d", id, i),
				"name": it.Function, "arguments": it.Arguments, "status": "completed"})
		} else {
			out = append(out, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%s_%d", id, i), "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": it.Text, "annotations": []any{}}}})
		}
	}
	return out
}

// response is the Responses API object of a reply.
func response(id, model string, r Reply, status string) map[string]any {
	u := r.Usage
	resp := map[string]any{"id": id, "object": "response", "status": status, "model": model, "output": []any{}}
	if status == "completed" {
		resp["output"] = items(id, r)
		resp["usage"] = map[string]any{
			"input_tokens":          u.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CachedInputTokens},
			"output_tokens":         u.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          u.InputTokens + u.OutputTokens,
		}
	}
	return resp
}

// stream writes the reply as the Responses API streams it: response.created, for each item
// response.output_item.added, its text or argument deltas and response.output_item.done, then
// response.completed with the usage.
func stream(w http.ResponseWriter, id, model string, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	seq := 0
	send := func(event string, data map[string]any) {
		data["type"] = event
		data["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if f != nil {
			f.Flush()
		}
	}
	send("response.created", map[string]any{"response": response(id, model, r, "in_progress")})
	for i, it := range items(id, r) {
		item := it.(map[string]any)
		send("response.output_item.added", map[string]any{"output_index": i, "item": item})
		if r.Items[i].Function != "" {
			send("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": item["id"], "delta": r.Items[i].Arguments})
			send("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": item["id"], "arguments": r.Items[i].Arguments})
		} else {
			send("response.output_text.delta", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "delta": r.Items[i].Text})
			send("response.output_text.done", map[string]any{"output_index": i, "item_id": item["id"], "content_index": 0, "text": r.Items[i].Text})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	send("response.completed", map[string]any{"response": response(id, model, r, "completed")})
}
