// Package lint checks rules of the code base that the compiler does not: which package may
// import which.
package lint

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/harness-edge/harness-edge/"

// layers ranks the packages: a package may import only packages of a lower rank, so data and
// calls flow one way (harness → agent → tools → store → engine, never back up).
var layers = map[string]int{
	"statefmt":                      0,
	"runtime/clock":                 0,
	"runtime/proc":                  0,
	"sysinfo":                       0,
	"runtime/task":                  1,
	"runtime/itlog":                 1,
	"runtime/inbox":                 1,
	"runtime/gitrepo":               1,
	"statefmt/event":                1,
	"store/trust":                   1,
	"bridge":                        1,
	"store":                         2,
	"store/memstore":                3,
	"runtime/agent":                 3,
	"runtime/tools":                 4,
	"runtime/driver/script":         5,
	"runtime/driver/command":        5,
	"runtime/driver/openai":         5,
	"runtime/harness":               6,
	"control/console":               1,
	"control/tracing":               2,
	"control":                       7,
	"bench":                         8,
	"fleet":                         8,
	"cmd/harness-edge/internal/cli": 9,
	"cmd/harness-edge":              10,
}

func TestImportsFlowOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if strings.HasPrefix(pkg, "internal/") || strings.HasPrefix(pkg, "examples/") || pkg == "fuzz" {
			continue // test kits, examples and cross-package fuzz targets may use anything below them
		}
		rank, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s has no layer: add it to layers", pkg)
			continue
		}
		for _, imp := range f[1:] {
			if pkg == "bridge" && strings.Contains(imp, "pebble") {
				t.Errorf("bridge imports %s: the engine knows nothing of disks", imp)
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if strings.HasPrefix(dep, "internal/") {
				// The workload generators also feed the benchmark suite and the doctor's self-check,
				// syncfs (an fsync counter) and taskgen (big task files) the benchmark suite, and
				// ident (a name check) and idlist (the bound on the ids a message names), with no
				// imports of their own, serve every layer; the other kits are for tests only.
				if dep != "internal/workload" && dep != "internal/stategen" && dep != "internal/ident" && dep != "internal/idlist" &&
					(dep != "internal/syncfs" && dep != "internal/taskgen" || pkg != "bench") {
					t.Errorf("%s (not a test) imports the test kit %s", pkg, dep)
				}
				continue
			}
			if r, ok := layers[dep]; ok && r >= rank {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down only", pkg, rank, dep, r)
			}
		}
	}
}

func TestNoPackageShadowsTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(line, " ")
		switch name {
		case "runtime", "context", "errors", "time", "os", "io", "sync", "testing":
			t.Errorf("package %s is named %s, as the standard library's", path, name)
		}
	}
}
