//go:build browser

package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// onAPhone starts a daemon with its HTTP API and headless Chromium on a 390×844 screen signed
// in to its console, and returns the daemon's API and a function that runs browser actions,
// each batch with 30 s, failing the test with the page when one fails.
func onAPhone(t *testing.T) (base string, api *control.Client, run func(what string, actions ...chromedp.Action)) {
	t.Helper()
	browserPath := chromium(t)
	base, tok, api := daemonWithHTTP(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserPath), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(390, 844))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", browserPath, err)
	}
	run = func(what string, actions ...chromedp.Action) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(pctx, actions...); err != nil {
			var html string
			_ = chromedp.Run(ctx, chromedp.OuterHTML("body", &html))
			t.Fatalf("%s: %v\npage:\n%s", what, err, html)
		}
	}
	run("sign in",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#signin"),
		chromedp.SetValue("#token", tok),
		chromedp.Click("#signin-button"),
		chromedp.WaitVisible("#nav"),
	)
	return base, api, run
}

// submitToEnd submits a task through c and returns once its harness has completed, failed or
// stopped at a gate.
func submitToEnd(t *testing.T, c *control.Client, id, task string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Submit(ctx, control.Submission{Task: []byte(task), Name: id + ".yaml"}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, id, func(e event.Event) bool {
		return e.Type == event.StateTransition && (e.To == statefmt.StatusCompleted || e.To == statefmt.StatusFailed) ||
			e.Type == event.Gate && e.Action == "waiting_for_human"
	})
}

// oneStep is a task of one step for the script agent: its description, and what the step does;
// gated, the step is critical and waits at gate g1 (autonomy 3).
func oneStep(t *testing.T, id, description, does string, gated bool) string {
	t.Helper()
	autonomy := 5
	if gated {
		autonomy = 3
	}
	return fmt.Sprintf(`id: %s
agent: A
autonomy: %d
retry: {maxRetries: 0}
workspace: %s
agents:
  A:
    driver: script
    script:
      plan:
        - {id: s1, description: %q, agent: A, critical: %t}
      steps:
        s1: [%s]
`, id, autonomy, t.TempDir(), description, gated, does)
}

// pageWidth is the page's width and the screen's: a page wider than the screen makes a phone
// scroll sideways, or shrink the whole page to fit.
const pageWidth = `[document.documentElement.scrollWidth, window.innerWidth]`

// TestConsoleOnAPhoneKeepsLongTextWithinTheScreen: a failed step's error of many lines, each with a
// URL longer than the screen is wide, breaks within the screen, on the list and on the
// harness's page; the page keeps the error's lines, and the list cuts it as the command line
// does, saying its length.
func TestConsoleOnAPhoneKeepsLongTextWithinTheScreen(t *testing.T) {
	base, api, run := onAPhone(t)
	var lines []string
	for i := 1; i <= 6; i++ {
		lines = append(lines, fmt.Sprintf("line %d: fetching https://example.com/%s failed", i, strings.Repeat("x", 200)))
	}
	long := strings.Join(lines, "\n")
	submitToEnd(t, api, "wide", oneStep(t, "wide", "fetch", fmt.Sprintf("{fail: permanent, message: %q}", long), false))

	var width []int
	var listed string
	run("the list",
		chromedp.Navigate(base+"/#/"),
		chromedp.WaitVisible(`div.harness[data-id="wide"]`),
		chromedp.Evaluate(pageWidth, &width),
		chromedp.Text(`div.harness[data-id="wide"]`, &listed),
	)
	if width[0] > width[1] {
		t.Errorf("the list is %d px wide on a %d px screen", width[0], width[1])
	}
	if strings.Contains(listed, "line 3") || !strings.Contains(listed, fmt.Sprintf("... (%d bytes in all)", len("step s1 failed: "+long))) {
		t.Errorf("the list shows the whole error, or does not say its length:\n%s", listed)
	}
	var shownLines int
	run("the harness's page",
		chromedp.Navigate(base+"/#/h/wide"),
		chromedp.WaitVisible(`li[data-step="s1"] .error`),
		chromedp.Evaluate(pageWidth, &width),
		chromedp.Evaluate(`document.querySelector('li[data-step="s1"] .error').innerText.split("\n").length`, &shownLines),
	)
	if width[0] > width[1] {
		t.Errorf("the harness's page is %d px wide on a %d px screen", width[0], width[1])
	}
	if shownLines != len(lines) {
		t.Errorf("the step's error of %d lines is shown in %d", len(lines), shownLines)
	}
}

// TestConsoleOnAPhoneShowsBidiControlsAsText: a step's description and a rejection's reason that
// carry the Unicode controls that reorder a line (U+202E shows "file\u202egnp.exe" as
// "fileexe.png") are shown with them as \u202e, as the command line shows them, on the gate
// a human approves from and on the harness's page; right-to-left text is shown as it is.
func TestConsoleOnAPhoneShowsBidiControlsAsText(t *testing.T) {
	base, api, run := onAPhone(t)
	submitToEnd(t, api, "spoof", oneStep(t, "spoof", "send report\u202egnp.exe שלום", "{output: sent}", true))

	bidi := `/[\u202a-\u202e\u2066-\u2069]/.test(document.body.innerText)`
	var controls bool
	var step string
	run("the harness's page",
		chromedp.Navigate(base+"/#/h/spoof"),
		chromedp.WaitVisible(`li[data-step="s1"]`),
		chromedp.Evaluate(bidi, &controls),
		chromedp.Text(`li[data-step="s1"]`, &step),
	)
	if controls || !strings.Contains(step, `send report\u202egnp.exe שלום`) {
		t.Errorf("the step is shown as %q (bidi controls on the page: %v), want them as \\u202e", step, controls)
	}
	run("reject with a reason that reorders",
		chromedp.Navigate(base+"/#/"),
		chromedp.WaitVisible(`div[data-gate="spoof/g1"]`),
		// In one go: the list may be drawn again between two steps.
		chromedp.Evaluate(`(() => {
			const g = document.querySelector('div[data-gate="spoof/g1"]');
			g.querySelector("input.reason").value = "no\u202e (stop)";
			g.querySelector("button.reject").click();
			return true;
		})()`, nil),
		chromedp.WaitNotPresent(`div[data-gate="spoof/g1"]`),
		chromedp.Navigate(base+"/#/h/spoof"),
		chromedp.WaitVisible(`#events li[data-type="gate"]`),
		chromedp.Poll(`document.getElementById("status").innerText.includes("rejected")`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(bidi, &controls),
	)
	if controls {
		var text string
		run("read the page", chromedp.Text("body", &text))
		t.Errorf("the page shows a bidi control after the rejection:\n%s", text)
	}
}

// TestConsoleOnAPhoneListsTheNewestOfEachStatusUntilAskedForAll: the harness list shows the newest
// 25 harnesses of a status and a button that shows them all, so that a store of thousands
// draws at once; a harness opened from far down the list opens at the top of its page, which
// offers no Pause, Resume or Stop for a completed harness.
func TestConsoleOnAPhoneListsTheNewestOfEachStatusUntilAskedForAll(t *testing.T) {
	base, api, run := onAPhone(t)
	for i := range 30 {
		id := fmt.Sprintf("done-%02d", i)
		submitToEnd(t, api, id, oneStep(t, id, "do it", "{output: done}", false))
	}
	var cards int
	run("the list",
		chromedp.Navigate(base+"/#/"),
		chromedp.WaitVisible(`button.show-all[data-status="completed"]`),
		chromedp.Evaluate(`document.querySelectorAll("div.harness").length`, &cards),
	)
	if cards != 25 {
		t.Errorf("the list shows %d of 30 completed harnesses, want the newest 25", cards)
	}
	var top float64
	var buttons string
	run("show all, and open the oldest",
		chromedp.Click(`button.show-all[data-status="completed"]`),
		chromedp.WaitVisible(`div.harness[data-id="done-00"]`),
		chromedp.Evaluate(`document.querySelectorAll("div.harness").length`, &cards),
		chromedp.Evaluate(`window.scrollTo(0, document.documentElement.scrollHeight), true`, nil),
		chromedp.Click(`div.harness[data-id="done-00"] a`),
		chromedp.WaitVisible(`#live`),
		chromedp.Evaluate(`window.scrollY`, &top),
		chromedp.Evaluate(`["pause", "resume", "stop"].filter((b) => document.getElementById(b)).join(" ")`, &buttons),
	)
	if buttons != "" {
		t.Errorf("a completed harness's page offers %s, which the API refuses", buttons)
	}
	if cards != 30 {
		t.Errorf("Show all shows %d of 30 completed harnesses", cards)
	}
	if top != 0 {
		t.Errorf("the harness's page opens scrolled %v px down, want at its top", top)
	}
}

// TestConsoleOnAPhoneKeepsARefusedReasonInItsBox: a rejection the API refuses (a reason over
// its 64 KiB limit) says why and leaves the reason typed in its box, through the page's redraw,
// to be mended; every card of the list shows its budget use, read from the report.
func TestConsoleOnAPhoneKeepsARefusedReasonInItsBox(t *testing.T) {
	base, api, run := onAPhone(t)
	submitToEnd(t, api, "held", oneStep(t, "held", "ship it", "{output: shipped}", true))
	var card, flashed string
	var kept int
	run("reject with a reason over its limit",
		chromedp.Navigate(base+"/#/"),
		chromedp.WaitVisible(`div[data-gate="held/g1"]`),
		chromedp.Text(`div.harness[data-id="held"]`, &card),
		// In one go: the list may be drawn again between two steps.
		chromedp.Evaluate(`(() => {
			const g = document.querySelector('div[data-gate="held/g1"]');
			const r = g.querySelector("input.reason");
			r.value = "x".repeat(70000);
			r.dispatchEvent(new Event("input"));
			g.querySelector("button.reject").click();
			return true;
		})()`, nil),
		chromedp.WaitVisible(`#flash.bad`),
		chromedp.Text(`#flash`, &flashed),
		chromedp.Poll(`document.querySelector('div[data-gate="held/g1"] input.reason').value.length`, &kept, chromedp.WithPollingTimeout(10*time.Second)),
	)
	if !strings.Contains(flashed, "reject g1 of held: ") || !strings.Contains(flashed, "65536") {
		t.Errorf("the refusal says %q", flashed)
	}
	if kept != 70000 {
		t.Errorf("the reason's box holds %d characters after the refusal, want the 70000 typed", kept)
	}
	if !strings.Contains(card, "tool calls 0") {
		t.Errorf("the card does not show its budget use:\n%s", card)
	}
}
