// Package fuzz holds harness-edge's fuzz targets. Each decoder-facing target runs every engine
// backend this build can load on the same input and fails when they disagree or misbehave
// (wazero's no-diff fuzzing). Seed corpora live in testdata/fuzz/<Target>/ and are generated
// from seeds.go: `go test ./fuzz -run TestSeedCorpus -rewrite` rewrites them.
//
// `make fuzz` fuzzes each target for FUZZTIME; `make test` runs every seed on every backend.
package fuzz
