// Package scripted keeps the books of the scripted model servers (anthropictest,
// responsestest): every request they got, in order, and the script of replies they answer the
// agent's turns from.
package scripted

import (
	"io"
	"net/http"
	"sync"
)

// Request is one request a server got, as it came.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Turn is the script's index of the reply it got (-1: not an agent turn).
	Turn int
}

// Capture reads r into a Request (not an agent turn until Take says so).
func Capture(r *http.Request) Request {
	body, _ := io.ReadAll(r.Body)
	return Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Turn: -1}
}

// Script is the replies of a server, taken in order, and the requests it got.
type Script[R any] struct {
	mu       sync.Mutex
	replies  []R
	next     int
	requests []Request
	answered int
}

// New is a script of replies.
func New[R any](replies []R) *Script[R] { return &Script[R]{replies: replies} }

// Take records req and numbers the answer (n counts from 1). An agent turn (turn true) gets the
// script's next reply; past the script's end, ok is false.
func (s *Script[R]) Take(req Request, turn bool) (reply R, n int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered++
	ok = true
	if turn {
		if s.next < len(s.replies) {
			req.Turn = s.next
			reply = s.replies[s.next]
		} else {
			ok = false
		}
		s.next++
	}
	s.requests = append(s.requests, req)
	return reply, s.answered, ok
}

// Record records a request that gets no reply from the script (a refused one).
func (s *Script[R]) Record(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

// Len is how many replies the script has.
func (s *Script[R]) Len() int { return len(s.replies) }

// Requests is every request so far.
func (s *Script[R]) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Turns is how many agent turns were taken from the script (past its end included).
func (s *Script[R]) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}
