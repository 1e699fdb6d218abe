package bench

import (
	"context"
	"regexp"
	"strconv"
	"testing"
)

// The task-file figures parse real task files of the sizes they name: each figure's note gives
// the plan it read, and the JSON one is the same kind of task.
func TestTaskFileFiguresParseTheFilesTheyName(t *testing.T) {
	rep := &Report{}
	if err := taskFiles(context.Background(), Options{Dir: t.TempDir(), Quick: true}, rep); err != nil {
		t.Fatal(err)
	}
	want := []string{"task_parse_yaml_1MiB", "task_parse_json_1MiB", "task_parse_linear"}
	if len(rep.Figures) != len(want) {
		t.Fatalf("%d figures, want %d", len(rep.Figures), len(want))
	}
	for i, f := range rep.Figures {
		if f.ID != want[i] || f.Value <= 0 || f.Bar == "" {
			t.Fatalf("figure %+v", f)
		}
	}
	for _, f := range rep.Figures[:2] {
		// A plan of thousands of steps: the file was read whole.
		m := regexp.MustCompile(`a plan of (\d+) steps`).FindStringSubmatch(f.Note)
		if m == nil {
			t.Fatalf("%s: note %q names no plan", f.ID, f.Note)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1000 {
			t.Fatalf("%s: a plan of %d steps, want 1,000 or more", f.ID, n)
		}
	}
}
