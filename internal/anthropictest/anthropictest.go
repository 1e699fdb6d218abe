// Package anthropictest is a scripted Anthropic Messages API server for tests that run the real
// Claude Code CLI: real HTTP on a loopback port, POST /v1/messages answered (streamed as
// server-sent events when the request asks for it, one JSON message otherwise) from a script of
// replies, POST /v1/messages/count_tokens answered with a fixed count, every other path 404. It
// records every request it gets, so a failing test can print what the CLI asked for.
//
// Claude Code sends more than its agent turns to the model (a title for the session, a check of
// the key, a summary): the script answers only the requests that offer the model tools (the agent
// loop), and every other message request gets a short text with zero usage, so that what the CLI
// reports adds up to the script's usage and nothing else.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/harness-edge/harness-edge/internal/scripted"
)

// Block is one content block of a reply: a text, or a tool call (Tool and Input set).
type Block struct {
	Text  string
	Tool  string
	Input map[string]any
}

// Usage is the token use a reply reports (the Messages API's usage object).
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Reply is one scripted answer to an agent turn.
type Reply struct {
	Blocks []Block
	Usage  Usage
}

// Text is a reply of one text block.
func Text(text string, u Usage) Reply { return Reply{Blocks: []Block{{Text: text}}, Usage: u} }

// ToolUse is a reply of one tool call.
func ToolUse(tool string, input map[string]any, u Usage) Reply {
	return Reply{Blocks: []Block{{Tool: tool, Input: input}}, Usage: u}
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

// Log is the requests, one a line (method, path, model, stream, tools, and the turn they got),
// for a test's failure message.
func (s *Server) Log() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		var m messagesRequest
		_ = json.Unmarshal(r.Body, &m)
		fmt.Fprintf(&b, "%s %s model=%q stream=%v tools=%d turn=%d body=%d bytes\n", r.Method, r.Path, m.Model, m.Stream, len(m.Tools), r.Turn, len(r.Body))
	}
	return b.String()
}

type messagesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := scripted.Capture(r)
	body := rec.Body
	var m messagesRequest
	isMessages := r.Method == http.MethodPost && r.URL.Path == "/v1/messages"
	if isMessages {
		if err := json.Unmarshal(body, &m); err != nil {
			s.Record(rec)
			writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not JSON: "+err.Error())
			return
		}
	}
	reply, n, ok := s.Take(rec, isMessages && len(m.Tools) > 0)
	overrun := !ok
	if isMessages && len(m.Tools) == 0 {
		reply = Text("OK", Usage{})
	}
	id := fmt.Sprintf("msg_%04d", n)

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens": 100}`)
	case !isMessages:
		writeError(w, http.StatusNotFound, "not_found_error", "no such endpoint: "+r.Method+" "+r.URL.Path)
	case overrun:
		writeError(w, http.StatusInternalServerError, "api_error", fmt.Sprintf("the script has %d replies and this is agent turn %d", s.Len(), s.Len()+1))
	case m.Stream:
		stream(w, id, m.Model, reply)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(message(id, m.Model, reply, reply.Usage.OutputTokens))
	}
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}

func stopReason(r Reply) string {
	for _, b := range r.Blocks {
		if b.Tool != "" {
			return "tool_use"
		}
	}
	return "end_turn"
}

func toolID(msgID string, i int) string {
	return fmt.Sprintf("toolu_%s_%d", strings.TrimPrefix(msgID, "msg_"), i)
}

// message is the whole reply as one Messages API object, with outputTokens as its output usage.
func message(id, model string, r Reply, outputTokens int64) map[string]any {
	content := []any{}
	for i, b := range r.Blocks {
		if b.Tool != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": toolID(id, i), "name": b.Tool, "input": b.Input})
		} else {
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	u := r.Usage
	u.OutputTokens = outputTokens
	return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stopReason(r), "stop_sequence": nil, "usage": u}
}

// stream writes the reply as the Messages API streams it: message_start (the input usage),
// for each block content_block_start, its deltas and content_block_stop, then message_delta
// (stop reason and output usage) and message_stop.
func stream(w http.ResponseWriter, id, model string, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if f != nil {
			f.Flush()
		}
	}
	start := message(id, model, Reply{Usage: r.Usage}, 1)
	start["stop_reason"] = nil
	send("message_start", map[string]any{"message": start})
	send("ping", map[string]any{})
	for i, b := range r.Blocks {
		if b.Tool != "" {
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": toolID(id, i), "name": b.Tool, "input": map[string]any{}}})
			in, _ := json.Marshal(b.Input)
			// In two pieces, as a real stream splits it.
			half := len(in) / 2
			for _, part := range []string{string(in[:half]), string(in[half:])} {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		} else {
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b.Text}})
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(r), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": r.Usage.OutputTokens}})
	send("message_stop", map[string]any{})
}
