// Package fuzz holds the fuzz targets that cross packages: the delta targets run every engine
// backend this build can load on the same input and fail when they disagree or misbehave
// (no-diff fuzzing), FuzzAgentOutput feeds every driver's output reader, and FuzzTaskFile the task
// file parser (what `run` and the daemon's API read). Targets of one
// package live beside it (statefmt's). Seed corpora live in testdata/fuzz/<Target>/ and are
// generated from seeds.go: `go test ./fuzz -run TestSeedCorpus -rewrite` rewrites them.
//
// `make fuzz` fuzzes each target for its number of executions (or FUZZTIME); `make test` runs every
// seed on every backend.
package fuzz
