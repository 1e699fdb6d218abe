package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// streamAPI answers health, and follows a harness's events slowly: one event, a pause longer
// than every timeout of the test's limits, another, then the end.
type streamAPI struct {
	API
	pause time.Duration
}

func (streamAPI) Health(context.Context) (Health, error) {
	return Health{OK: true, Version: "test", Owner: OwnerDaemon}, nil
}

func (a streamAPI) Events(ctx context.Context, id string, after uint64, follow bool, f func(event.Event) error) error {
	for n := uint64(1); n <= 2; n++ {
		if n == 2 {
			select {
			case <-time.After(a.pause):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := f(event.Event{N: n, Type: event.Warning, HarnessID: id}); err != nil {
			return err
		}
	}
	return nil
}

var testLimits = Limits{MaxConns: 32, ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
	WriteTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}

// serveTest serves Handler(api, "tok") on 127.0.0.1 within lim until the test ends.
func serveTest(t *testing.T, api API, lim Limits) (addr string, ll *limitListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var lim2 = lim
	lim2.MaxConns = 0 // the listener is limited here, to watch it
	ll = limitListen(l, lim.MaxConns).(*limitListener)
	go func() { done <- Serve(ctx, ll, Handler(api, "tok"), lim2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l.Addr().String(), ll
}

func TestSlowClientsDoNotStarveTheAPI(t *testing.T) {
	addr, ll := serveTest(t, streamAPI{}, testLimits)
	const slow = 300
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		conns = append(conns, c)
		// Half never finish their headers; half promise a body and send a byte of it.
		if i%2 == 0 {
			fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n")
		} else {
			fmt.Fprint(c, "POST /v1/harnesses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
		}
	}
	// A client that keeps sending the body, a byte at a time, is cut off too.
	drip, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, drip)
	fmt.Fprint(drip, "POST /v1/harnesses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Length: 100000\r\n\r\n")
	stopDrip := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopDrip:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := drip.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stopDrip); wg.Wait() }()

	// Health still answers, once the slow clients have been timed out.
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatalf("health beside %d slow clients: %v", slow, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"ok":true`) {
		t.Fatalf("health: %d %s", resp.StatusCode, b)
	}
	t.Logf("health answered %v after %d slow connections were opened", time.Since(start).Round(time.Millisecond), slow)
	if p := ll.peak.Load(); p > int64(testLimits.MaxConns) {
		t.Fatalf("%d connections were served at once, above the limit of %d", p, testLimits.MaxConns)
	}
	// Every slow connection was closed by the server.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("slow connection %d was not closed by the server: %v", i, err)
		}
	}
	client.CloseIdleConnections()
	for deadline := time.Now().Add(5 * time.Second); ll.active.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still served", ll.active.Load())
		}
	}
}

func TestEventStreamOutlastsTheTimeouts(t *testing.T) {
	pause := 4 * testLimits.WriteTimeout
	addr, _ := serveTest(t, streamAPI{pause: pause}, testLimits)
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/harnesses/h/events?follow=1", nil)
	req.Header.Set("Authorization", "Bearer tok")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			got = append(got, k)
		}
	}
	if strings.Join(got, ",") != "warning,warning,end" {
		t.Fatalf("the stream gave %v (%v), want two events and the end", got, sc.Err())
	}
	if d := time.Since(start); d < pause {
		t.Fatalf("the stream ended after %v, before the pause of %v", d, pause)
	}
}

func TestLimitsAreSet(t *testing.T) {
	for name, l := range map[string]Limits{"HTTP": HTTPLimits, "socket": SocketLimits} {
		if l.MaxConns <= 0 || l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 {
			t.Errorf("%s: a limit is missing: %+v", name, l)
		}
	}
}
