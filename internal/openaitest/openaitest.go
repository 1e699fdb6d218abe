// Package openaitest is a fake OpenAI-compatible chat-completions server for tests and examples:
// real HTTP on a loopback port, answering from a script of replies (text, tool calls, errors,
// 429s with Retry-After, malformed bodies, replies that never come) and recording every request
// it got, decoded independently of the driver that sent it.
package openaitest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// Message is a chat message as the server decoded it.
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
}

// Text is the message's content ("" when null).
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// ToolCall is a tool call in a message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Request is one chat-completions request the server got.
type Request struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Temperature *float64 `json:"temperature"`
	// Auth is the Authorization header.
	Auth string `json:"-"`
}

// Call is a tool call a scripted reply makes.
type Call struct {
	Name string
	Args string // raw JSON text, as a model writes it
	// ID is the call's id as sent (default: call_REQUEST_INDEX, unique); some servers send
	// the same one for several calls.
	ID string
}

// Reply is one scripted answer.
type Reply struct {
	// Content and Calls make a normal answer (status 200).
	Content string
	Calls   []Call
	// PromptTokens and CompletionTokens are the usage reported (default: a quarter of the
	// request's message bytes, as a tokenizer would roughly count, and 10).
	PromptTokens, CompletionTokens int
	// NoTotal leaves total_tokens out of the usage (some servers report only its parts).
	NoTotal bool
	// Status other than 200 answers with Body (default: an API error object saying ErrorMsg).
	Status     int
	ErrorMsg   string
	RetryAfter string
	// Body, when set, is sent as it is (malformed JSON, say).
	Body string
	// Hang holds the reply until the client gives up (its request context ends).
	Hang bool
}

// Server is the fake server. Replies are served in order; when the script is empty, Respond
// answers (or, when nil, a 500 saying the script ran out).
type Server struct {
	*httptest.Server
	// Respond answers requests beyond the script.
	Respond func(Request) Reply

	mu       sync.Mutex
	script   []Reply
	requests []Request
	arrived  chan int
}

// New starts a server on a loopback port; Close it when done. Its API base URL is Endpoint().
func New() *Server {
	s := NewHandler()
	s.Server = httptest.NewServer(s)
	return s
}

// NewHandler returns the fake as an http.Handler, to serve on a listener of one's own (its
// embedded httptest server stays nil).
func NewHandler() *Server { return &Server{arrived: make(chan int, 1024)} }

// Endpoint is the base URL to configure an openai agent with.
func (s *Server) Endpoint() string { return s.URL + "/v1" }

// Push appends replies to the script.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, r...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Arrived delivers the number of each request as it arrives (before it is answered).
func (s *Server) Arrived() <-chan int { return s.arrived }

// ServeHTTP answers a chat-completions request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error": {"message": "not found: `+r.Method+" "+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	var req Request
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error(), "")
		return
	}
	req.Auth = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	var rep Reply
	scripted := len(s.script) > 0
	if scripted {
		rep, s.script = s.script[0], s.script[1:]
	}
	respond := s.Respond
	s.mu.Unlock()
	select {
	case s.arrived <- n:
	default:
	}
	if !scripted {
		if respond == nil {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("fake server: no reply scripted for request %d", n), "")
			return
		}
		rep = respond(req)
	}
	switch {
	case rep.Hang:
		<-r.Context().Done()
		return
	case rep.Body != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cmp.Or(rep.Status, http.StatusOK))
		io.WriteString(w, rep.Body)
		return
	case rep.Status != 0 && rep.Status != http.StatusOK:
		writeError(w, rep.Status, rep.ErrorMsg, rep.RetryAfter)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if len(rep.Calls) > 0 {
		var calls []map[string]any
		for i, c := range rep.Calls {
			calls = append(calls, map[string]any{"id": cmp.Or(c.ID, "call_"+strconv.Itoa(n)+"_"+strconv.Itoa(i)), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Args}})
		}
		msg["tool_calls"] = calls
		if rep.Content == "" {
			msg["content"] = nil
		}
	}
	size := 0
	for _, m := range req.Messages {
		size += len(m.Text()) + 16
		for _, c := range m.ToolCalls {
			size += len(c.Function.Name) + len(c.Function.Arguments) + 16
		}
	}
	pt, ct := cmp.Or(rep.PromptTokens, size/4), cmp.Or(rep.CompletionTokens, 10)
	usage := map[string]int{"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
	if rep.NoTotal {
		delete(usage, "total_tokens")
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-" + strconv.Itoa(n), "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": map[bool]string{true: "tool_calls", false: "stop"}[len(rep.Calls) > 0]}},
		"usage":   usage,
	})
}

func writeError(w http.ResponseWriter, status int, msg, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": http.StatusText(status)}})
}

// NotesSession answers like a small model doing the examples' task: it writes NOTES.md with
// write_file, reads it back with read_file, and then reports. Each answer depends only on the
// conversation it is sent (so a resumed conversation gets the right next answer); a request
// without tools (a compaction summary) gets a summary.
func NotesSession(r Request) Reply {
	if len(r.Tools) == 0 {
		return Reply{Content: "Summary: NOTES.md was written and read back."}
	}
	var results []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			results = append(results, m.Text())
		}
	}
	switch len(results) {
	case 0:
		return Reply{Content: "I will write the notes first.", Calls: []Call{{Name: "write_file",
			Args: `{"path": "NOTES.md", "content": "# Notes\n\n- harness-edge checkpoints every model turn\n- a crash loses at most the turn in flight\n"}`}}}
	case 1:
		return Reply{Calls: []Call{{Name: "read_file", Args: `{"path": "NOTES.md"}`}}}
	}
	return Reply{Content: "NOTES.md is written and reads back as intended: " + strconv.Itoa(len(results[len(results)-1])) + " bytes checked."}
}
