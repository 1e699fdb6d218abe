package command

import (
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// Every agent made in a process shares one compiled set of the default patterns: compiling them
// per agent was most of a direct-path run's own time.
func TestAgentsShareTheCompiledDefaultRateLimits(t *testing.T) {
	a, err := New("a", &task.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("b", &task.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.rateLimit) != len(DefaultRateLimitPatterns) || len(b.rateLimit) != len(DefaultRateLimitPatterns) {
		t.Fatalf("%d and %d patterns, want the %d defaults", len(a.rateLimit), len(b.rateLimit), len(DefaultRateLimitPatterns))
	}
	for i := range a.rateLimit {
		if a.rateLimit[i] != b.rateLimit[i] {
			t.Fatalf("default pattern %d compiled twice", i)
		}
	}
}

// A task's own patterns are its agent's alone: another agent made after it does not see them,
// and the defaults still apply to both.
func TestATasksRateLimitPatternsStayWithItsAgent(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	own, err := New("own", &task.Agent{RateLimit: task.RateLimitConfig{Patterns: []string{`quota is gone`}}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New("plain", &task.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := DetectRateLimit("error: quota is gone", own.rateLimit, now); !ok {
		t.Fatal("the task's pattern was not applied")
	}
	if _, ok := DetectRateLimit("error: quota is gone", plain.rateLimit, now); ok {
		t.Fatal("another agent's pattern leaked into this one")
	}
	if _, ok := DetectRateLimit("HTTP 429 Too Many Requests", own.rateLimit, now); !ok {
		t.Fatal("the defaults do not apply beside the task's pattern")
	}
	if _, err := New("bad", &task.Agent{RateLimit: task.RateLimitConfig{Patterns: []string{`(`}}}); err == nil {
		t.Fatal("a pattern that does not compile was accepted")
	}
}
