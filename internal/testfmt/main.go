// Command testfmt turns `go test -json` into what a person watching a long run wants: each
// top-level test's line as it finishes (with its time), each package's ok/FAIL line as go test
// prints it, and the whole output of every test that failed. `make test` pipes the Go tests
// through it so that a package that runs for minutes shows progress.
//
//	go test -json ./... | go run ./internal/testfmt
//
// It exits 1 when a test or a package failed, or when the input ends without a package result.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	logs := map[string]*strings.Builder{} // package/test -> its output so far
	failed := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // a build error or other plain text: pass it on
			out.Flush()
			continue
		}
		key := e.Package + "/" + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				// The package's own lines: keep the result lines go test prints, drop -v noise.
				if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
					strings.HasPrefix(e.Output, "?") || strings.HasPrefix(e.Output, "panic") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			b := logs[key]
			if b == nil {
				b = &strings.Builder{}
				logs[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "skip":
			if e.Test != "" && !strings.Contains(e.Test, "/") && e.Elapsed >= 1 {
				fmt.Fprintf(out, "    --- %s: %s (%.1fs)\n", strings.ToUpper(e.Action), e.Test, e.Elapsed)
			}
			delete(logs, key)
		case "fail":
			failed = true
			if e.Test != "" {
				if b := logs[key]; b != nil {
					fmt.Fprint(out, b.String())
				}
				delete(logs, key)
			}
		}
		out.Flush()
	}
	if failed {
		os.Exit(1)
	}
}
