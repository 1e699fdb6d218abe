package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/store"
)

// reseal rewrites an export section by section: f gets each section's tag and body (and the
// ordinal of that tag so far) and returns the body to write. Every checksum and the closing
// digest are computed anew, so the file passes every check of its bytes: what it says is left
// to the import's other checks.
func reseal(t *testing.T, data []byte, f func(tag byte, n int, body []byte) []byte) []byte {
	t.Helper()
	const magic = "HECHAIN2\n"
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	out := []byte(magic)
	seen := map[byte]int{}
	for pos := len(magic); pos < len(data); {
		tag := data[pos]
		n, w := binary.Uvarint(data[pos+1:])
		if w <= 0 {
			t.Fatalf("section at byte %d does not decode", pos)
		}
		body := data[pos+1+w : pos+1+w+int(n)]
		pos += 1 + w + int(n) + 4
		if tag == 'Z' {
			sum := sha256.Sum256(out)
			body = sum[:]
		} else {
			body = f(tag, seen[tag], bytes.Clone(body))
		}
		seen[tag]++
		start := len(out)
		out = append(out, tag)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out[start:], castagnoli))
	}
	return out
}

// renumber returns an export of solo whose events carry the numbers number gives them.
func renumber(t *testing.T, data []byte, number func(i int, n uint64) uint64) []byte {
	t.Helper()
	return reseal(t, data, func(tag byte, i int, body []byte) []byte {
		if tag != 'E' {
			return body
		}
		n, w := binary.Uvarint(body)
		return append(binary.AppendUvarint(nil, number(i, n)), body[w:]...)
	})
}

// An export whose checksums all match but whose event log a store could not keep is refused,
// naming the harness and the event, and the store is left as it was: a log with a gap in its
// numbering (which verify reports as damage), and one numbered near the top of the numbers,
// which the store would read only in part and whose next events would wrap around to 0 and
// overwrite the first ones. Without either, the same file, resealed, imports.
func TestImportRefusesAnEventLogTheStoreCouldNotKeep(t *testing.T) {
	a := open(t, t.TempDir())
	member(t, a, "solo", "", nil, statefmt.StatusPaused, 3)
	data := export(t, a, "solo")
	a.Close()
	bdir := t.TempDir()
	b := open(t, bdir)
	member(t, b, "other", "", nil, statefmt.StatusPaused, 2)
	b.Close()
	before := dump(t, bdir)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"a gap", renumber(t, data, func(i int, n uint64) uint64 {
			if i >= 3 {
				return n + 1
			}
			return n
		}), "harness solo: event 5 follows event 3 (a log's events are numbered without a gap)"},
		{"the last number", renumber(t, data, func(i int, n uint64) uint64 { return n + (1<<64 - 7) }), "harness solo: event 18446744073709551610 is numbered outside"},
		{"near the top", renumber(t, data, func(i int, n uint64) uint64 { return n + (1<<64 - 9) }), "harness solo: event 18446744073709551608 is numbered outside"},
	} {
		b := open(t, bdir)
		_, err := b.Import(c.data, store.ImportOptions{})
		b.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was imported") {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
		if after := dump(t, bdir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the refused import changed the store", c.name)
		}
	}
	b = open(t, bdir)
	defer b.Close()
	if _, err := b.Import(renumber(t, data, func(_ int, n uint64) uint64 { return n }), store.ImportOptions{}); err != nil {
		t.Fatalf("the export resealed as it was: %v", err)
	}
	noProblems(t, b)
}

// An index entry that says its harness is damaged (a store works that out when it reads a
// harness and never writes it down, so no export carries one) is refused, naming it, and the
// store is left as it was: imported, the harness would be listed as damaged and fail verify,
// though every part of it checked.
func TestImportRefusesAnIndexEntryThatSaysItIsDamaged(t *testing.T) {
	a := open(t, t.TempDir())
	member(t, a, "solo", "", nil, statefmt.StatusPaused, 3)
	data := export(t, a, "solo")
	a.Close()
	planted := reseal(t, data, func(tag byte, _ int, body []byte) []byte {
		if tag != 'I' {
			return body
		}
		var e map[string]any
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		e["damaged"] = "planted"
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	dir := t.TempDir()
	b := open(t, dir)
	_, err := b.Import(planted, store.ImportOptions{})
	ls, lerr := b.List()
	b.Close()
	if err == nil || !strings.Contains(err.Error(), `harness solo: its index entry says it is damaged ("planted")`) {
		t.Fatalf("an index entry that says it is damaged: %v", err)
	}
	if lerr != nil || len(ls) != 0 {
		t.Fatalf("the refused import left %v (%v)", ls, lerr)
	}
}

// An export a newer harness-edge made (a later format in its whole header or its magic, or a
// header field this version does not know) is refused as such, saying to import it with a
// version as new, rather than called damaged; nothing is imported. A format-2 export whose
// magic reads as a later format's (a flipped bit) is still damaged.
func TestAnExportFromANewerVersionSaysSoRatherThanDamaged(t *testing.T) {
	a := open(t, t.TempDir())
	member(t, a, "solo", "", nil, statefmt.StatusPaused, 3)
	data := export(t, a, "solo")
	a.Close()
	header := func(edit func(h map[string]any)) []byte {
		return reseal(t, data, func(tag byte, _ int, body []byte) []byte {
			if tag != 'H' {
				return body
			}
			var h map[string]any
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatal(err)
			}
			edit(h)
			b, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	}
	format3 := header(func(h map[string]any) { h["format"] = 3 })
	magic3 := append([]byte("HECHAIN3\n"), format3[len("HECHAIN2\n"):]...)
	b := open(t, t.TempDir())
	defer b.Close()
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"format 3 in the header", format3, "it is format 3, and this harness-edge reads chain exports of format 2"},
		{"a field it does not know", header(func(h map[string]any) { h["signature"] = "x" }), `it has a header field this version does not know ("signature")`},
		{"a format-3 magic", magic3, "it is a format-3 chain export"},
		{"a format-3 magic and nothing after it", []byte("HECHAIN3\n"), "it is a format-3 chain export"},
	} {
		_, err := b.Import(c.data, store.ImportOptions{})
		var te *store.TransferError
		if !errors.Is(err, store.ErrNewerExport) || errors.As(err, &te) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "import it with a harness-edge at least as new") {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	flipped := append([]byte("HECHAIN3\n"), data[len("HECHAIN2\n"):]...)
	var te *store.TransferError
	if _, err := b.Import(flipped, store.ImportOptions{}); !errors.As(err, &te) || te.What != "the magic (the file's first 9 bytes)" {
		t.Fatalf("a format-2 export with a format-3 magic: %v", err)
	}
	if ls, err := b.List(); err != nil || len(ls) != 0 {
		t.Fatalf("the refused imports left %v (%v)", ls, err)
	}
}
