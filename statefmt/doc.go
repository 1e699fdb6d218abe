// Package statefmt holds HarnessState and every format harness-edge persists:
//
//   - JSON v1 (json.go): the interchange format of export/import, the API and `show --json`. It
//     reads the reference JSON example (testdata/seed-example.json) as is, refuses unknown fields and unknown schema
//     versions, and upgrades older versions through a migration registry (migrate.go).
//   - the binary encoding (binary.go) that checkpoints carry: deterministic, compact, and laid
//     out so that a state whose history grew by a record and whose plan gained a step output
//     re-encodes in time proportional to those and the plan's skeleton, keeping every earlier
//     byte where it was.
//   - the checkpoint record envelope (envelope.go): kind, sequence numbers, hashes, compression,
//     format versions, and a checksum over the whole record.
//
// In memory, a state is normalised: times are UTC without monotonic readings, empty slices and
// maps are nil, and free-form JSON values are canonical (compact, object keys sorted). Every
// decoder returns states in this form, so a decoded state compares equal (reflect.DeepEqual) to
// the normalised original. Format version numbers only ever grow; retired ones stay reserved.
package statefmt
