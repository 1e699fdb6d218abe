package control

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what the clients of one listener can hold: connections and the time a request
// may take to arrive, to be answered, and to idle between requests. A client that sends its
// headers or body slowly, or never, loses its connection when a timeout passes, and at most
// MaxConns connections are served at once: further ones wait in the kernel's queue and take no
// descriptor of the daemon's.
type Limits struct {
	// MaxConns is how many connections are served at once (0: no limit).
	MaxConns int
	// ReadHeaderTimeout bounds the time to read a request's headers; ReadTimeout the headers
	// and the body.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds the time from the request's headers to the end of its answer. An
	// event stream (events?follow=1) lifts it and bounds each event's write instead, as do
	// report and verify for the time they work.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive connection.
	IdleTimeout time.Duration
}

// HTTPLimits are the HTTP API's limits. Its requests are short (MaxBody at most) and anyone who
// reaches the address can open connections, so its read timeouts are short: under a flood the
// slots come free quickly.
var HTTPLimits = Limits{MaxConns: 512, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
	WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second}

// SocketLimits are the control socket's: only the store's user can connect, but a stuck or
// runaway client must not take the owner's descriptors either.
var SocketLimits = Limits{MaxConns: 128, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
	WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second}

// eventWriteTimeout bounds the write of one event of a stream (and of the answer of a handler
// that lifted WriteTimeout while it worked).
const eventWriteTimeout = 30 * time.Second

// workDeadlines lifts the write deadline for a handler that works long (its time is not the
// client's doing) and returns the function to call before it writes: it bounds the write.
func workDeadlines(w http.ResponseWriter) (beforeWrite func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	return func() { _ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) }
}

// limitListener serves at most cap(sem) connections at once: Accept waits for one to close.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	// active and peak count the connections served (peak: the most at once).
	active, peak atomic.Int64
}

func limitListen(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	n := l.active.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.active.Add(-1)
		<-c.l.sem
	})
	return err
}
