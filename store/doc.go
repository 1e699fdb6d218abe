// Package store is the Pebble checkpoint store: per harness a chain of checkpoint records
// (keyframes and deltas made by the engine, zstd-compressed), a durable event log written in the
// same synced batch as the checkpoint it belongs to, an index entry for listing, and the task the
// harness runs. It also owns the harness-id rule (ValidID) and the transfer format of export and
// import. One process opens a store at a time.
//
// The store is the only cache of a harness's chain: consumers hold no copy of their own, and
// Release lets a harness's in-memory chain go.
//
// Keys (harness ids cannot contain '/', so '/' separates fields safely):
//
//	i/<id>               index entry (JSON): listing, head and keyframe sequence numbers
//	c/<id>/<seq u64be>   checkpoint record (statefmt envelope, payload zstd-compressed)
//	e/<id>/<n u64be>     durable event log entry (JSON), append-only
//	t/<id>               the harness's task definition (JSON), what resume runs
//	n/<id>/<name>        a named checkpoint: a copy of the state at one checkpoint (named.go)
package store
