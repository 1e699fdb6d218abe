package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/control/console"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// gatedTask is a task whose second step is critical: at autonomy 3 it waits at gate g1.
func gatedTask(t *testing.T, id string) string {
	t.Helper()
	return fmt.Sprintf(`id: %s
agent: A
autonomy: 3
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: prep, description: prepare, agent: A}
        - {id: ship, description: ship it, agent: A, dependsOn: [prep], critical: true}
      steps:
        prep: [{tool: write_file, args: {path: prep.txt, content: ready}}, {output: ready}]
        ship: [{tool: write_file, args: {path: shipped.txt, content: "yes"}}, {output: shipped}]
`, id, t.TempDir())
}

// submitFailing submits through c a task whose one step fails at its first attempt (for good:
// no automatic retry) and succeeds at its second, and returns once the harness has failed.
func submitFailing(t *testing.T, c *control.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: %s
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      plan:
        - {id: s1, description: fetch, agent: A}
      steps:
        s1: [{fail: permanent, message: upstream down, times: 1}, {tool: write_file, args: {path: got.txt, content: up}}, {output: up}]
`, id, t.TempDir())), Name: id + ".yaml"}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, id, func(e event.Event) bool { return e.Type == event.StateTransition && e.To == statefmt.StatusFailed })
	// The failure is logged before the daemon's run of the harness returns: until it has, a
	// change of course is refused as for a running harness.
	for {
		h, err := c.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(h.Running, id) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the daemon still runs %s after it failed", id)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

var errSeen = errors.New("seen")

// submitToGate submits a gated task through c and returns once its gate waits for a human.
func submitToGate(t *testing.T, c *control.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Submit(ctx, control.Submission{Task: []byte(gatedTask(t, id)), Name: id + ".yaml"}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, id, func(e event.Event) bool { return e.Type == event.Gate && e.Action == "waiting_for_human" })
}

// waitEvent follows id's events until one matches.
func waitEvent(t *testing.T, c *control.Client, id string, match func(event.Event) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Events(ctx, id, 0, true, func(e event.Event) error {
		if match(e) {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		t.Fatalf("waiting for an event of %s: %v", id, err)
	}
}

// browser is an HTTP client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	code int
	body string
	h    http.Header
}

func send(t *testing.T, c *http.Client, method, u string, header map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

// signIn signs c in with token and returns the session's CSRF token.
func signIn(t *testing.T, c *http.Client, base, token string) string {
	t.Helper()
	a := send(t, c, "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": base},
		url.Values{"token": {token}}.Encode())
	if a.code != http.StatusSeeOther || a.h.Get("Location") != "/" {
		t.Fatalf("sign-in: %d %s %q", a.code, a.body, a.h.Get("Location"))
	}
	s := send(t, c, "GET", base+"/console/session", nil, "")
	var info console.SessionInfo
	if s.code != 200 || json.Unmarshal([]byte(s.body), &info) != nil || len(info.CSRF) != 64 {
		t.Fatalf("session after sign-in: %d %s", s.code, s.body)
	}
	return info.CSRF
}

func pendingGates(t *testing.T, c *control.Client, id string) int {
	t.Helper()
	st, err := c.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range st.Gates {
		if g.Status == statefmt.GatePending {
			n++
		}
	}
	return n
}

func TestConsoleServesItsPageWithHeadersThatKeepItOutOfFrames(t *testing.T) {
	d, _, _ := startDaemon(t, storeDir(t))
	base := "http://" + d.HTTPAddr().String()
	c := browser(t)
	page := send(t, c, "GET", base+"/", nil, "")
	if page.code != 200 || !strings.HasPrefix(page.h.Get("Content-Type"), "text/html") || !strings.Contains(page.body, `action="/console/login"`) {
		t.Fatalf("GET /: %d %s\n%s", page.code, page.h, page.body)
	}
	if csp := page.h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'self'") || page.h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("GET / headers: %v", page.h)
	}
	for _, f := range []string{"app.js", "app.css"} {
		if a := send(t, c, "GET", base+"/console/"+f, nil, ""); a.code != 200 || len(a.body) < 100 {
			t.Fatalf("GET /console/%s: %d", f, a.code)
		}
	}
	if a := send(t, c, "GET", base+"/console/index.html", nil, ""); a.code != 404 {
		t.Fatalf("GET /console/index.html: %d, want 404", a.code)
	}
	if a := send(t, c, "GET", base+"/console/nothing.js", nil, ""); a.code != 404 || !strings.Contains(a.body, `the console has no file \"nothing.js\"`) {
		t.Fatalf("GET /console/nothing.js: %d %s", a.code, a.body)
	}
	// Without a session the console's session endpoint and the API refuse, and say why.
	if a := send(t, c, "GET", base+"/console/session", nil, ""); a.code != 401 || !strings.Contains(a.body, "not signed in") {
		t.Fatalf("session without a sign-in: %d %s", a.code, a.body)
	}
	if a := send(t, c, "GET", base+"/v1/harnesses", nil, ""); a.code != 401 {
		t.Fatalf("list without a sign-in: %d %s", a.code, a.body)
	}
}

func TestConsoleSignInSetsAStrictHttpOnlyCookieAndAWrongTokenSetsNothing(t *testing.T) {
	dir := storeDir(t)
	d, _, _ := startDaemon(t, dir)
	base := "http://" + d.HTTPAddr().String()
	tok, err := control.Token(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := browser(t)
	for _, wrong := range []string{"", "nope", strings.Repeat("0", len(tok)), tok + "0", tok[:len(tok)-1]} {
		a := send(t, c, "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, url.Values{"token": {wrong}}.Encode())
		if a.code != http.StatusSeeOther || a.h.Get("Location") != "/?signin=wrong" || a.h.Get("Set-Cookie") != "" {
			t.Fatalf("sign-in with %q: %d %q %q", wrong, a.code, a.h.Get("Location"), a.h.Get("Set-Cookie"))
		}
	}
	// A sign-in form posted from another site is refused (login CSRF).
	if a := send(t, c, "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"},
		url.Values{"token": {tok}}.Encode()); a.code != 403 || a.h.Get("Set-Cookie") != "" {
		t.Fatalf("cross-site sign-in: %d %s", a.code, a.body)
	}
	if a := send(t, c, "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		strings.Repeat("x", 8192)); a.code != 400 {
		t.Fatalf("an oversized sign-in form: %d %s", a.code, a.body)
	}
	a := send(t, c, "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, url.Values{"token": {tok}}.Encode())
	resp := &http.Response{Header: a.h}
	cookies := resp.Cookies()
	if a.code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign-in: %d %v", a.code, a.h)
	}
	ck := cookies[0]
	if ck.Name != console.CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure || len(ck.Value) != 64 || strings.Contains(ck.Value, tok) {
		t.Fatalf("the session cookie: %+v", ck)
	}
	// Behind a TLS-terminating proxy the cookie is for TLS only.
	behind := send(t, browser(t), "POST", base+"/console/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-Proto": "https"},
		url.Values{"token": {tok}}.Encode())
	if cs := (&http.Response{Header: behind.h}).Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("the session cookie behind a TLS proxy: %v", behind.h)
	}
	if a := send(t, c, "GET", base+"/v1/harnesses", nil, ""); a.code != 200 || strings.TrimSpace(a.body) != "[]" {
		t.Fatalf("list with the session: %d %s", a.code, a.body)
	}
	if a := send(t, c, "GET", base+"/metrics", nil, ""); a.code != 200 || !strings.Contains(a.body, "harness_edge_gates_waiting 0") {
		t.Fatalf("metrics with the session: %d %s", a.code, a.body)
	}
}

func TestConsoleRefusesAStateChangeWithoutItsCSRFTokenOrFromAnotherSite(t *testing.T) {
	base, tok, api := daemonWithHTTP(t)
	submitToGate(t, api, "g")
	c := browser(t)
	csrf := signIn(t, c, base, tok)
	approve := base + "/v1/harnesses/g/approve"
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"no CSRF token", nil, "has no X-CSRF-Token header"},
		{"a forged CSRF token", map[string]string{console.CSRFHeader: strings.Repeat("a", 64)}, "is not this session's"},
		{"a CSRF token one character short", map[string]string{console.CSRFHeader: csrf[1:]}, "is not this session's"},
		{"another origin", map[string]string{console.CSRFHeader: csrf, "Origin": "http://evil.example"}, "comes from another origin"},
		{"a null origin", map[string]string{console.CSRFHeader: csrf, "Origin": "null"}, "comes from another origin"},
		{"another site", map[string]string{console.CSRFHeader: csrf, "Sec-Fetch-Site": "cross-site"}, "comes from another site"},
		{"a sibling site", map[string]string{console.CSRFHeader: csrf, "Sec-Fetch-Site": "same-site"}, "comes from another site"},
	} {
		a := send(t, c, "POST", approve, tc.header, "{}")
		if a.code != 403 || !strings.Contains(a.body, tc.want) || !strings.Contains(a.body, "POST /v1/harnesses/g/approve refused") {
			t.Fatalf("%s: %d %s", tc.name, a.code, a.body)
		}
		if n := pendingGates(t, api, "g"); n != 1 {
			t.Fatalf("%s: the refused approval changed the gates (%d pending)", tc.name, n)
		}
	}
	// Freezing and signing out are state changes too.
	if a := send(t, c, "POST", base+"/v1/freeze", nil, "{}"); a.code != 403 {
		t.Fatalf("freeze without the CSRF token: %d %s", a.code, a.body)
	}
	if h, err := api.Health(context.Background()); err != nil || h.Frozen {
		t.Fatalf("a refused freeze froze the daemon: %+v %v", h, err)
	}
	if a := send(t, c, "POST", base+"/console/logout", nil, ""); a.code != 403 {
		t.Fatalf("sign-out without the CSRF token: %d %s", a.code, a.body)
	}
	// The session's own token from its own page approves.
	a := send(t, c, "POST", approve, map[string]string{console.CSRFHeader: csrf, "Origin": base, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, `{"gate":"g1"}`)
	if a.code != 200 || !strings.Contains(a.body, `"status":"approved"`) || !strings.Contains(a.body, `"resumed":true`) {
		t.Fatalf("approve with the session's CSRF token: %d %s", a.code, a.body)
	}
	if n := pendingGates(t, api, "g"); n != 0 {
		t.Fatalf("after the approval %d gates are pending", n)
	}
}

func TestConsoleSessionsLeaveTheBearerTokenCheckAsItWas(t *testing.T) {
	dir := storeDir(t)
	d, _, _ := startDaemon(t, dir)
	base := "http://" + d.HTTPAddr().String()
	tok, err := control.Token(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := browser(t)
	csrf := signIn(t, c, base, tok)
	// A wrong bearer token is refused even beside a live session cookie: the header is the
	// API's to check.
	wrong := map[string]string{"Authorization": "Bearer " + strings.Repeat("0", len(tok)), console.CSRFHeader: csrf}
	if a := send(t, c, "GET", base+"/v1/harnesses", wrong, ""); a.code != 401 {
		t.Fatalf("a wrong bearer token with a session: %d %s", a.code, a.body)
	}
	if a := send(t, c, "POST", base+"/v1/freeze", wrong, "{}"); a.code != 401 {
		t.Fatalf("freeze with a wrong bearer token and a session: %d %s", a.code, a.body)
	}
	// The bearer token alone works as before, with no CSRF token (it is no cookie a browser
	// sends by itself).
	plain := &http.Client{}
	if a := send(t, plain, "POST", base+"/v1/freeze", map[string]string{"Authorization": "Bearer " + tok}, "{}"); a.code != 200 || !strings.Contains(a.body, `"frozen":true`) {
		t.Fatalf("freeze with the bearer token: %d %s", a.code, a.body)
	}
	// A session cookie made up by a client is no session.
	forged := browser(t)
	u, _ := url.Parse(base)
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: console.CookieName, Value: strings.Repeat("f", 64)}})
	if a := send(t, forged, "GET", base+"/v1/harnesses", nil, ""); a.code != 401 {
		t.Fatalf("a forged session cookie: %d %s", a.code, a.body)
	}
	// Signing out ends the session at the daemon: the same cookie no longer works.
	cookies := c.Jar.Cookies(u)
	if a := send(t, c, "POST", base+"/console/logout", map[string]string{console.CSRFHeader: csrf}, ""); a.code != 204 {
		t.Fatalf("sign-out: %d %s", a.code, a.body)
	}
	replay := browser(t)
	replay.Jar.SetCookies(u, cookies)
	if a := send(t, replay, "GET", base+"/v1/harnesses", nil, ""); a.code != 401 {
		t.Fatalf("the cookie of an ended session: %d %s", a.code, a.body)
	}
}

// The console's course operations (retry, naming a checkpoint, rollback, replan, delete) are
// state changes like the others: from a signed-in browser without the session's CSRF token
// each is refused and changes nothing; with it, a retry goes through.
func TestConsoleRefusesCourseChangesWithoutItsCSRFToken(t *testing.T) {
	base, tok, api := daemonWithHTTP(t)
	submitFailing(t, api, "f")
	ctx := context.Background()
	if _, err := api.Checkpoint(ctx, "f", control.CheckpointRequest{Name: "failed-once"}); err != nil {
		t.Fatal(err)
	}
	c := browser(t)
	csrf := signIn(t, c, base, tok)
	h := base + "/v1/harnesses/f"
	for _, r := range []struct{ method, url, body string }{
		{"POST", h + "/retry", `{}`},
		{"POST", h + "/checkpoints", `{"name": "later"}`},
		{"POST", h + "/rollback", `{"to": "failed-once"}`},
		{"POST", h + "/replan", `{"change": "skip: [s1]"}`},
		{"DELETE", h + "?force=1", ``},
	} {
		a := send(t, c, r.method, r.url, map[string]string{"Content-Type": "application/json"}, r.body)
		if a.code != 403 || !strings.Contains(a.body, "has no X-CSRF-Token header") {
			t.Fatalf("%s %s without the CSRF token: %d %s", r.method, r.url, a.code, a.body)
		}
	}
	st, err := api.State(ctx, "f")
	if err != nil || st.Status != statefmt.StatusFailed || st.Plan.Steps[0].Status != statefmt.StepFailed {
		t.Fatalf("after the refused requests: %+v %v", st, err)
	}
	if l, err := api.ListCheckpoints(ctx, "f"); err != nil || len(l.Named) != 1 {
		t.Fatalf("after the refused requests the named checkpoints are %+v (%v)", l, err)
	}
	a := send(t, c, "POST", h+"/retry", map[string]string{console.CSRFHeader: csrf, "Origin": base, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"},
		`{"by": "console"}`)
	if a.code != 200 || !strings.Contains(a.body, `"status":"paused"`) {
		t.Fatalf("retry with the session's CSRF token: %d %s", a.code, a.body)
	}
}
