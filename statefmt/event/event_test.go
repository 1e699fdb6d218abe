package event_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/statefmt"
)

func TestSinksWriteEveryField(t *testing.T) {
	ok := false
	ev := event.Event{Type: event.ToolCall, HarnessID: "h1", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), N: 7,
		Tool: "bash", DurationMs: 1.5, Success: &ok, Message: "exit 1"}
	var lines bytes.Buffer
	event.NewJSONLines(&lines).Emit(ev)
	event.NewJSONLines(&lines).Emit(event.Event{Type: event.StateTransition, HarnessID: "h1", Time: ev.Time, From: statefmt.StatusRunning, To: statefmt.StatusFailed, Reason: "r"})
	var back event.Event
	first, _, _ := strings.Cut(lines.String(), "\n")
	if err := json.Unmarshal([]byte(first), &back); err != nil || back.Tool != "bash" || back.N != 7 || *back.Success || back.HarnessID != "h1" {
		t.Fatalf("JSON line %q: %v", first, err)
	}
	if strings.Count(lines.String(), "\n") != 2 {
		t.Fatalf("want one line per event: %q", lines.String())
	}
	var logged bytes.Buffer
	event.Slog{L: slog.New(slog.NewTextHandler(&logged, nil))}.Emit(ev)
	for _, want := range []string{"level=WARN", "msg=tool_call", "harnessId=h1", "tool=bash", "success=false", "durationMs=1.5"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("slog line %q lacks %q", logged.String(), want)
		}
	}
	// Integers are logged as integers, in text and in JSON.
	used := event.Event{Type: event.StepCompleted, HarnessID: "h1", Time: ev.Time, StepID: "s1", CPUMs: 12.5, RSSBytes: 31739904}
	logged.Reset()
	event.Slog{L: slog.New(slog.NewTextHandler(&logged, nil))}.Emit(used)
	event.Slog{L: slog.New(slog.NewJSONHandler(&logged, nil))}.Emit(used)
	for _, want := range []string{"rssBytes=31739904 ", `"rssBytes":31739904,`, "cpuMs=12.5", `"cpuMs":12.5`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("slog lines %q lack %q", logged.String(), want)
		}
	}
}

// A log line carries at most LogLimit bytes of an event's text, cut between runes and saying
// how long it was; the event itself is not changed.
func TestTheLogSinkCutsLongTextBetweenRunes(t *testing.T) {
	var buf bytes.Buffer
	sink := event.Slog{L: slog.New(slog.NewTextHandler(&buf, nil))}
	reason := strings.Repeat("é", 32768) // 64 KiB, two bytes a rune
	e := event.Event{Type: event.Course, HarnessID: "h", Reason: reason, Message: "short"}
	sink.Emit(e)
	line := buf.String()
	if len(line) > 2*event.LogLimit || !strings.Contains(line, "… (65536 bytes in all)") || !strings.Contains(line, "message=short") {
		t.Fatalf("a %d-byte log line: %.200q", len(line), line)
	}
	if e.Reason != reason {
		t.Fatal("the event's reason was changed")
	}
	if got := event.LogText(reason); !utf8.ValidString(got) {
		t.Fatalf("cut inside a rune: %q", got[len(got)-40:])
	}
	if got := event.LogText("short"); got != "short" {
		t.Fatalf("%q", got)
	}
}
