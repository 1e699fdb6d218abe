//go:build browser

package control_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
)

// chromium finds the browser: $CHROMIUM, else Debian's chromium on PATH. Without one the test
// skips, saying so, unless HARNESS_EDGE_BROWSER_REQUIRED is set (make test-browser sets it,
// after installing chromium): then a missing browser fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install -y chromium, or `make test-browser`, which installs it)"
	if os.Getenv("HARNESS_EDGE_BROWSER_REQUIRED") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// evalAsync evaluates a JavaScript expression that may be a promise.
func evalAsync(js string, res any) chromedp.Action {
	return chromedp.Evaluate(js, res, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })
}

// TestConsoleInABrowser drives the console in headless Chromium against a real daemon, on a
// phone-sized screen: sign in, find the harness waiting at its gate, approve it and watch it
// complete through the live events; reject another with a reason (and not without one); and
// check that the page's requests without the cookie or with a forged CSRF token are refused.
// With SCREENSHOTS set it saves its screenshots there (make test-browser: docs/img).
func TestConsoleInABrowser(t *testing.T) {
	browserPath := chromium(t)
	base, tok, api := daemonWithHTTP(t)
	submitToGate(t, api, "ship")
	submitToGate(t, api, "hold")

	shots := os.Getenv("SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserPath), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(390, 844))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 180*time.Second)
	defer cancel()
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), png, 0o644)
		})
	}
	// The browser starts with ctx (a context's first Run starts it, and its end closes it).
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", browserPath, err)
	}
	// Each part has its own 30 s, so that the page can still be read when one times out.
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(pctx, actions...); err != nil {
			var html string
			_ = chromedp.Run(ctx, chromedp.OuterHTML("body", &html))
			t.Fatalf("%s: %v\npage:\n%s", what, err, html)
		}
	}

	// Sign in: a wrong token first (the form says so), then the right one.
	run("sign in with a wrong token",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#signin"),
		chromedp.SendKeys("#token", "not-the-token"),
		chromedp.Click("#signin-button"),
		chromedp.WaitVisible("#signin-error"),
	)
	// Signed out, the page offers nothing but the sign-in: no nav, no "Sign out".
	var navShown bool
	run("the nav while signed out", chromedp.Evaluate(`getComputedStyle(document.getElementById("nav")).display !== "none"`, &navShown))
	if navShown {
		t.Error("the sign-in page shows the nav (Harnesses, Submit, Report, Sign out) to a visitor not signed in")
	}
	run("sign in",
		shot("console-signin.png"),
		chromedp.SetValue("#token", tok),
		chromedp.Click("#signin-button"),
		chromedp.WaitVisible(`div[data-gate="ship/g1"]`),
		chromedp.WaitVisible(`div[data-gate="hold/g1"]`),
		chromedp.WaitVisible(`div.harness[data-id="ship"]`),
		shot("console-gates.png"),
	)
	// A gate is worded as the command line words it, not by its raw kind.
	var waitsOn string
	run("read the gate's wording", chromedp.Text(`div[data-gate="ship/g1"] span.waits-on`, &waitsOn))
	if !strings.HasPrefix(waitsOn, "before step ") || strings.Contains(waitsOn, "step gate") {
		t.Fatalf("the console words gate ship/g1 %q, want \"before step ...\"", waitsOn)
	}
	var cookie string
	run("read document.cookie", chromedp.Evaluate(`document.cookie`, &cookie))
	if strings.Contains(cookie, "harness_edge_session") {
		t.Fatalf("the page's script can read the session cookie: %q", cookie)
	}

	// Approve from the harness's page and watch it complete through the live events. The page
	// redraws on each action and as events come, and the redraws overlap: one whose answer
	// comes back late (here a redraw started before the approval, whose state request is held
	// 2 s) must not put back the status the harness has left. The page stayed at "paused"
	// for good when it did.
	var stale bool
	run("approve ship",
		chromedp.Navigate(base+"/#/h/ship"),
		chromedp.WaitVisible(`#live`),
		chromedp.Poll(`document.getElementById("live") && document.getElementById("live").textContent === "(live)"`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`(() => {
			const real = window.fetch;
			let held = false;
			window.fetch = (path, opts) => {
				if (!held && path === "/v1/harnesses/ship" && (!opts || opts.method === "GET")) {
					held = true;
					return real(path, opts).then((r) => new Promise((ok) => setTimeout(() => ok(r), 2000)));
				}
				return real(path, opts);
			};
			refreshHarness("ship");
			return true;
		})()`, &stale),
		chromedp.Click(`div[data-gate="ship/g1"] button.approve`),
		chromedp.WaitVisible(`#events li[data-type="plan_completed"]`),
		chromedp.WaitVisible(`li[data-step="ship"] .badge.completed`),
		chromedp.WaitVisible(`#status .badge.completed`),
		chromedp.Sleep(2500*time.Millisecond),
		chromedp.WaitVisible(`#status .badge.completed`),
		shot("console-harness.png"),
	)
	if st, err := api.State(ctx, "ship"); err != nil || st.Status != statefmt.StatusCompleted {
		t.Fatalf("ship after Approve: %v %v", st.Status, err)
	}

	// Reject: without a reason the page refuses and nothing is sent; with one the gate is
	// rejected with it.
	run("reject hold without a reason",
		chromedp.Navigate(base+"/#/"),
		chromedp.WaitVisible(`div[data-gate="hold/g1"]`),
		chromedp.Click(`div[data-gate="hold/g1"] button.reject`),
		chromedp.WaitVisible(`#flash.bad`),
	)
	if n := pendingGates(t, api, "hold"); n != 1 {
		t.Fatalf("a rejection without a reason changed the gates: %d pending", n)
	}
	run("reject hold with a reason",
		chromedp.SendKeys(`div[data-gate="hold/g1"] input.reason`, "not tonight"),
		chromedp.Click(`div[data-gate="hold/g1"] button.reject`),
		chromedp.WaitNotPresent(`div[data-gate="hold/g1"]`),
	)
	st, err := api.State(ctx, "hold")
	if err != nil || len(st.Gates) != 1 || st.Gates[0].Status != statefmt.GateRejected || st.Gates[0].Reason != "not tonight" {
		t.Fatalf("hold after Reject: %+v %v", st, err)
	}

	// Change of course: a failed harness, retried from its page, then resumed, completes (its
	// step's second attempt); a retry of it once completed is refused with the API's words;
	// a checkpoint named on the page is rolled back to, and the harness runs to the end again.
	submitFailing(t, api, "flaky")
	run("retry a failed harness",
		chromedp.Navigate(base+"/#/h/flaky"),
		chromedp.WaitVisible(`#status .badge.failed`),
		chromedp.WaitVisible(`#live`),
		chromedp.Click(`#retry`),
		chromedp.WaitVisible(`#status .badge.paused`),
		chromedp.Poll(`document.getElementById("flash").textContent.startsWith("retry: paused (steps s1)")`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Click(`#resume`),
		chromedp.WaitVisible(`#events li[data-type="plan_completed"]`),
		chromedp.WaitVisible(`li[data-step="s1"] .badge.completed`),
		chromedp.WaitVisible(`#status .badge.completed`),
		shot("console-course.png"),
	)
	if st, err := api.State(ctx, "flaky"); err != nil || st.Status != statefmt.StatusCompleted || st.Plan.Steps[0].Attempts != 2 {
		t.Fatalf("flaky after Retry and Resume: %+v %v", st, err)
	}
	_, refusal := api.Retry(ctx, "flaky", control.RetryRequest{})
	if refusal == nil {
		t.Fatal("a retry of a completed harness was not refused")
	}
	var shown string
	run("retry a completed harness",
		chromedp.Click(`#retry`),
		chromedp.WaitVisible(`#flash.bad`),
		chromedp.Text(`#flash`, &shown),
	)
	if want := "retry: " + refusal.Error(); shown != want {
		t.Fatalf("the page says %q for a refused retry, want the API's words: %q", shown, want)
	}
	run("name a checkpoint and roll back to it",
		chromedp.SendKeys(`#checkpoint-name`, "all-done"),
		chromedp.Click(`#name-checkpoint`),
		chromedp.WaitReady(`#rollback-to option[value="all-done"]`),
		chromedp.Click(`#rollback`),
		chromedp.Poll(`document.getElementById("flash").textContent.startsWith("rolled back to all-done")`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.WaitVisible(`#status .badge.paused`),
	)
	if st, err := api.State(ctx, "flaky"); err != nil || st.Status != statefmt.StatusPaused {
		t.Fatalf("flaky after Roll back: %v %v", st.Status, err)
	}
	// An invalid plan change: the API's line-numbered refusal on the page, the text kept.
	bad := "skip: [nope]"
	_, refusal = api.Replan(ctx, "flaky", control.ReplanRequest{Change: bad, Name: "bad.yaml"})
	if refusal == nil {
		t.Fatal("an invalid plan change was not refused")
	}
	var kept string
	run("replan with an invalid change",
		chromedp.SendKeys(`#replan-change`, bad),
		chromedp.SendKeys(`#replan-name`, "bad.yaml"),
		chromedp.Click(`#replan`),
		chromedp.WaitVisible(`#flash.bad`),
		chromedp.Poll(`document.getElementById("flash").textContent.startsWith("replan: ")`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text(`#flash`, &shown),
		chromedp.Value(`#replan-change`, &kept),
	)
	if want := "replan: " + refusal.Error(); shown != want || kept != bad {
		t.Fatalf("the page says %q (the change typed is now %q), want the API's words %q and the change kept", shown, kept, want)
	}

	// A task file picked on the Submit page in UTF-16 with its byte-order mark (Windows
	// PowerShell's `>`) is read as the command line reads it: its text, not UTF-8 garble.
	text := "id: picked\nprompt: Café ☕ 𝄞\n"
	wide := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(text)) {
		wide = append(wide, byte(u), byte(u>>8))
	}
	picked := filepath.Join(t.TempDir(), "picked.yaml")
	if err := os.WriteFile(picked, wide, 0o644); err != nil {
		t.Fatal(err)
	}
	var got string
	run("pick a UTF-16 task file",
		chromedp.Navigate(base+"/#/submit"),
		chromedp.WaitVisible(`#task`),
		chromedp.SetUploadFiles(`input[type="file"]`, []string{picked}, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("task").value !== ""`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Value(`#task`, &got),
	)
	if got != text {
		t.Fatalf("the picked UTF-16 file reads %q, want %q", got, text)
	}

	// The page's own requests: without the cookie, or with a forged CSRF token, refused; with
	// its session's token, let through.
	var statuses []int
	run("requests from the page", evalAsync(`(async () => {
		const csrf = (await (await fetch("/console/session")).json()).csrf;
		const post = (path, headers, credentials) => fetch(path, {method: "POST", headers, credentials, body: "{}"}).then((r) => r.status);
		return [
			await post("/v1/freeze", {"X-CSRF-Token": csrf}, "omit"),
			await post("/v1/freeze", {"X-CSRF-Token": "f".repeat(64)}, "same-origin"),
			await post("/v1/freeze", {}, "same-origin"),
			await fetch("/v1/harnesses", {credentials: "omit"}).then((r) => r.status),
			await post("/v1/unfreeze", {"X-CSRF-Token": csrf, "Content-Type": "application/json"}, "same-origin"),
		];
	})()`, &statuses))
	if fmt.Sprint(statuses) != "[401 403 403 401 200]" {
		t.Fatalf("requests from the page: %v, want [401 403 403 401 200]", statuses)
	}
	if h, err := api.Health(ctx); err != nil || h.Frozen {
		t.Fatalf("a refused freeze froze the daemon: %+v %v", h, err)
	}

	run("the report", chromedp.Navigate(base+"/#/report?since=0s"), chromedp.WaitVisible(`#since`), shot("console-report.png"))
	run("sign out", chromedp.Navigate(base+"/#/"), chromedp.WaitVisible("#signout"), chromedp.Click("#signout"), chromedp.WaitVisible("#signin"))
	var after int
	run("after sign-out", evalAsync(`fetch("/v1/harnesses").then((r) => r.status)`, &after))
	if after != 401 {
		t.Fatalf("the API after sign-out: %d, want 401", after)
	}
}
