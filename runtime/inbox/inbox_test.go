package inbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTellPendingRemove(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC)
	a, err := Tell(dir, "h", "first", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Tell(dir, "h", "second", now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Pending(dir, "h")
	if err != nil || len(got) != 2 || got[0] != a || got[1] != b || a.From != "human" {
		t.Fatalf("pending %+v, %v", got, err)
	}
	// A damaged file and a temporary one are not messages.
	os.WriteFile(filepath.Join(dir, "h", "bogus.msg"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "h", ".x.tmp"), []byte("{}"), 0o600)
	if got, _ := Pending(dir, "h"); len(got) != 2 {
		t.Fatalf("%d pending", len(got))
	}
	if err := Remove(dir, "h", []string{a.Name, "gone-already"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := Pending(dir, "h"); len(got) != 1 || got[0] != b || Exists(dir, "h", a.Name) || !Exists(dir, "h", b.Name) {
		t.Fatalf("after remove: %+v", got)
	}
	if got, err := Pending(dir, "nobody"); err != nil || got != nil {
		t.Fatalf("an empty inbox: %+v, %v", got, err)
	}
}

func TestTellRefusesAndStoresNothing(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{"", "  \n", strings.Repeat("x", MaxBytes+1), "\xff\xfe"} {
		if _, err := Tell(dir, "h", text, time.Now()); err == nil {
			t.Errorf("%q accepted", text[:min(len(text), 10)])
		}
	}
	if got, _ := Pending(dir, "h"); len(got) != 0 {
		t.Fatalf("refused messages were stored: %d", len(got))
	}
	for i := range MaxPending {
		if _, err := Tell(dir, "h", "m", time.Unix(int64(i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Tell(dir, "h", "one more", time.Now()); !errors.Is(err, ErrFull) {
		t.Fatalf("a full inbox: %v", err)
	}
	if got, _ := Pending(dir, "h"); len(got) != MaxPending {
		t.Fatalf("%d pending", len(got))
	}
}
