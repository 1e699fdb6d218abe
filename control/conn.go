package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// Conn is one command's way to a store: the client of the process that owns it, or the store
// itself, opened here because no process owns it. Its API is the same either way.
type Conn struct {
	API
	owner *Client
	store *store.Store
}

// Connect reaches the store in dir: through the control socket of the process that owns it,
// or by opening the store here when none does. An owner that is starting holds the store's
// lock before its socket answers, and a command holds it for a moment: either is waited for,
// up to 3 s (then the store's store.ErrStoreInUse is returned).
func Connect(dir string) (*Conn, error) { return connect(dir, false) }

// ConnectRead is Connect for a command that only reads: a store no process owns is opened with
// store.OpenToRead (read-only: the process lock as always, nothing written, nothing synced,
// what Pebble's logs hold read into memory and left for a writer to recover; read-write as
// Connect opens it when there is no database yet or the logs hold over a megabyte).
func ConnectRead(dir string) (*Conn, error) { return connect(dir, true) }

func connect(dir string, readOnly bool) (*Conn, error) {
	c, s, err := reach(dir, readOnly)
	switch {
	case err != nil:
		return nil, err
	case c != nil:
		return &Conn{API: c, owner: c}, nil
	}
	return &Conn{API: Local(s), store: s}, nil
}

// reach finds who has the store in dir: the client of the process that owns it, or else the
// store itself, opened here (read-only with readOnly, when it has a database).
func reach(dir string, readOnly bool) (*Client, *store.Store, error) {
	// A socket in a directory another user could write to may be theirs: the store directory is
	// checked before anything is sent to it.
	if err := trust.CheckDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	for try := 0; ; try++ {
		c, err := Dial(dir)
		if err == nil {
			return c, nil, nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("the process that owns the store %s did not answer on its control socket within %v: it may be busy for a moment or hung; try again, and read its log if it goes on (%w)", dir, dialWait, err)
		}
		if !errors.Is(err, ErrNoOwner) {
			return nil, nil, fmt.Errorf("the control socket of %s: %w", dir, err)
		}
		var s *store.Store
		if readOnly {
			s, err = store.OpenToRead(dir)
		} else {
			s, err = store.OpenStore(dir, store.StoreOptions{})
		}
		if err == nil || !errors.Is(err, store.ErrStoreInUse) || try >= 30 {
			return nil, s, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Owner reports whether a process owns the store (the operations then go to it through its
// socket) and what it said about itself when the connection was made.
func (c *Conn) Owner() (Health, bool) {
	if c.owner == nil {
		return Health{}, false
	}
	return c.owner.Owner, true
}

// Close releases what Connect opened: the store, or the idle connections to its owner. Only
// the first call does anything.
func (c *Conn) Close() error {
	if c.owner != nil {
		c.owner.http.CloseIdleConnections()
	}
	s := c.store
	c.store = nil
	if s == nil {
		return nil
	}
	return s.Close()
}

// Do runs f with a connection to the store in dir and closes it after. When the owner ended
// between the connection and a request, which it then never got (ErrNotSent), f runs again
// on a new connection (usually the store itself, free now); at most three times in all.
func Do(dir string, f func(*Conn) error) error { return do(dir, false, f) }

// DoRead is Do for an operation that only reads (ConnectRead): show, ls, events, report...
func DoRead(dir string, f func(*Conn) error) error { return do(dir, true, f) }

func do(dir string, readOnly bool, f func(*Conn) error) error {
	for try := 0; ; try++ {
		c, err := connect(dir, readOnly)
		if err != nil {
			return err
		}
		err = f(c)
		c.Close()
		if !errors.Is(err, ErrNotSent) || try >= 2 {
			return err
		}
	}
}

// OwnedError says that another process owns the store, and what to do about it. It wraps
// store.ErrStoreInUse.
type OwnedError struct {
	Dir string
	// Owner is what the owner said about itself.
	Owner Health
}

func (e *OwnedError) Error() string {
	if e.Owner.Owner == OwnerDaemon {
		return fmt.Sprintf("%v: %s is owned by the harness-edge daemon (pid %d): hand it the task with `harness-edge submit TASK`, or stop the daemon first", store.ErrStoreInUse, e.Dir, e.Owner.PID)
	}
	running := "no harness running yet"
	if len(e.Owner.Running) > 0 {
		running = "running " + strings.Join(e.Owner.Running, ", ")
	}
	return fmt.Sprintf("%v: %s is owned by a foreground `harness-edge run` (pid %d, %s): wait for it, or pause it with `harness-edge pause ID`", store.ErrStoreInUse, e.Dir, e.Owner.PID, running)
}

func (e *OwnedError) Unwrap() error { return store.ErrStoreInUse }

// openToOwn opens the store to own it; another owner is an *OwnedError.
func openToOwn(dir string) (*store.Store, error) {
	c, s, err := reach(dir, false)
	if c != nil {
		c.http.CloseIdleConnections()
		return nil, &OwnedError{Dir: dir, Owner: c.Owner}
	}
	return s, err
}

// Owned is a store this process owns for a foreground run: its server runs the operations,
// and its control socket serves them to other processes until Close.
type Owned struct {
	srv    *Server
	cancel context.CancelFunc
	done   chan struct{}
	close  sync.Once
	err    error
}

// Own opens the store in dir to own it and serves its control socket. cfg.Owner defaults to
// "run". A store another process owns is refused with an *OwnedError.
func Own(dir string, cfg Config) (*Owned, error) {
	s, err := openToOwn(dir)
	if err != nil {
		return nil, err
	}
	cfg.Owner = cmp.Or(cfg.Owner, OwnerRun)
	srv := NewServer(s, cfg)
	l, err := ListenSocket(dir)
	if err != nil {
		s.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Owned{srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		_ = Serve(ctx, l, withMetrics(Handler(srv, ""), srv, nil, "", true), SocketLimits)
	}()
	return o, nil
}

// Server is the owner's server: its Manager runs the foreground harness.
func (o *Owned) Server() *Server { return o.srv }

// Close stops serving the control socket (removing it) and closes the store. Only the first
// call does anything.
func (o *Owned) Close() error {
	o.close.Do(func() {
		o.cancel()
		<-o.done
		o.err = o.srv.Store().Close()
	})
	return o.err
}

// WriteStateJSON writes StateJSON's bytes to w: the owner's as they came, or, when no process
// owns the store, the state's JSON as it is made (statefmt.WriteJSON), never held whole.
func (c *Conn) WriteStateJSON(ctx context.Context, id string, w io.Writer) error {
	if c.owner != nil {
		b, err := c.owner.StateJSON(ctx, id)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	st, err := c.API.State(ctx, id)
	if err != nil {
		return err
	}
	return statefmt.WriteJSON(w, st)
}
