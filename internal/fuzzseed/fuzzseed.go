// Package fuzzseed keeps fuzz seed corpora in step with the code that generates them: each
// package with fuzz targets lists its seeds in Go, and a test compares them with the corpus
// files under testdata/fuzz/<Target>/ (or rewrites them with -rewrite).
package fuzzseed

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the seed corpus files under testdata/fuzz")

// Seed is one named corpus entry: the arguments of a fuzz target, in order.
type Seed struct {
	Name string
	Args [][]byte
}

// File renders a seed in the `go test fuzz v1` format.
func File(s Seed) []byte {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range s.Args {
		b.WriteString("[]byte(" + strconv.Quote(string(a)) + ")\n")
	}
	return []byte(b.String())
}

// Check fails when the corpus under testdata/fuzz differs from seeds (by target); with
// -rewrite it writes the corpus instead. pkg names the package for the hint.
func Check(t *testing.T, pkg string, seeds map[string][]Seed) {
	t.Helper()
	for target, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		for _, s := range list {
			path := filepath.Join(dir, s.Name)
			want := File(s)
			if *rewrite {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v: run `go test %s -run TestSeedCorpus -rewrite`", err, pkg)
			} else if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: run `go test %s -run TestSeedCorpus -rewrite`", path, pkg)
			}
		}
	}
}
