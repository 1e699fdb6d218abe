// Package bench is harness-edge's benchmark suite. Figures come from `make bench` (Go
// benchmarks over the real code paths, several counts, medians); never from timed unit tests.
//
// The engine benchmarks put every delta operation beside a plain memcmp (bytes.Equal) pass over
// the same bytes, measured in the same run, so the ratio "encode cost / memcmp cost" is readable on
// a noisy shared machine.
package bench
