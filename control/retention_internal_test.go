package control

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRetentionLogNamesTenPrunedHarnessesAndCountsThem(t *testing.T) {
	var res DeleteResult
	for i := range 5000 {
		res.Harnesses = append(res.Harnesses, Removed{ID: fmt.Sprintf("h%d", i+1)})
	}
	res.Freed = 123
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("retention: pruned", prunedAttrs(res, 30*24*time.Hour)...)
	line := b.String()
	want := `harnesses="h1,h2,h3,h4,h5,h6,h7,h8,h9,h10 and 4,990 more" count=5000 freedBytes=123 olderThan=720h0m0s`
	if !strings.Contains(line, want) || strings.Contains(line, "h11") {
		t.Fatalf("the log line of a prune of 5,000 harnesses:\n%.400s\nwant it to hold %s", line, want)
	}
}
