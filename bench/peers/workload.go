package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// A chunk is what one step reads: lines [Offset, Offset+Limit) of a file (1-based), as the
// read_file tool takes them.
type chunk struct {
	Path   string `json:"path"` // relative to the workspace
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// workload is N steps of real text: each step reads 20-60 lines of a Go source file of the
// standard library, chosen by the seed, and records them as its output.
type workload struct {
	Workspace string   // a scratch copy of the chosen files (read_file reads only inside it)
	Chunks    []chunk  // one per step
	Want      []string // each step's output, as the script driver records it
	Appended  int      // bytes of output over all steps
}

// goSources lists the standard library's .go files under root (sorted, testdata and vendor
// left out: they hold generated or non-UTF-8 text).
func goSources(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// maxChunk keeps every output well under the read_file tool's output cap (64 KiB), so that
// no system stores a truncated output.
const maxChunk = 16 << 10

// newWorkload picks n chunks from the Go sources under src with the seed and copies the files
// they come from into workspace.
func newWorkload(src, workspace string, n int, seed uint64) (*workload, error) {
	files, err := goSources(src)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go sources under %s", src)
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	w := &workload{Workspace: workspace}
	lines := map[string][][]byte{}
	for len(w.Chunks) < n {
		f := files[r.IntN(len(files))]
		ls, ok := lines[f]
		if !ok {
			data, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				return nil, err
			}
			if utf8.Valid(data) {
				ls = bytes.SplitAfter(data, []byte("\n"))
			}
			lines[f] = ls
		}
		if len(ls) < 20 {
			continue
		}
		k := min(20+r.IntN(41), len(ls))
		off := 1 + r.IntN(len(ls)-k+1)
		out := strings.TrimRight(string(bytes.Join(ls[off-1:off-1+k], nil)), "\n")
		if out == "" || len(out) > maxChunk {
			continue
		}
		w.Chunks = append(w.Chunks, chunk{Path: f, Offset: off, Limit: k})
		w.Want = append(w.Want, out)
		w.Appended += len(out)
	}
	for f, ls := range lines {
		if ls == nil {
			continue
		}
		dst := filepath.Join(workspace, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, bytes.Join(ls, nil), 0o644); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// read does what a peer's step does: read the chunk's lines from the workspace copy, as
// read_file does, trailing newlines trimmed as the script driver trims them.
func (w *workload) read(c chunk) (string, error) {
	data, err := os.ReadFile(filepath.Join(w.Workspace, c.Path))
	if err != nil {
		return "", err
	}
	ls := bytes.SplitAfterN(data, []byte("\n"), c.Offset+c.Limit)
	if len(ls) < c.Offset-1+c.Limit {
		return "", fmt.Errorf("%s has fewer than %d lines", c.Path, c.Offset-1+c.Limit)
	}
	return strings.TrimRight(string(bytes.Join(ls[c.Offset-1:c.Offset-1+c.Limit], nil)), "\n"), nil
}

// digest is the sha256 of the outputs in step order, each prefixed by its length.
func digest(outs []string) string {
	h := sha256.New()
	for _, o := range outs {
		fmt.Fprintf(h, "%d:", len(o))
		h.Write([]byte(o))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// check compares what a system read back with the workload's outputs.
func (w *workload) check(name string, got []string) error {
	if len(got) != len(w.Want) {
		return fmt.Errorf("%s: read back %d outputs, want %d", name, len(got), len(w.Want))
	}
	for i := range got {
		if got[i] != w.Want[i] {
			return fmt.Errorf("%s: step %d's output differs from what it read (%d bytes, want %d)", name, i+1, len(got[i]), len(w.Want[i]))
		}
	}
	return nil
}

// dirBytes is the size of every file under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	return n, err
}
