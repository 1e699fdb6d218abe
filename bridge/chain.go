package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Record kinds, as in the record envelope (statefmt.KindKeyframe, statefmt.KindDelta).
const (
	KindKeyframe uint32 = 1
	KindDelta    uint32 = 2
)

// RecordInfo is a checkpoint record's header as the engine makes and verifies it. Its layout is
// eternal_record_info's (64 bytes, no padding), so both native backends pass it by pointer.
type RecordInfo struct {
	Kind      uint32
	Reserved  uint32
	Seq       uint64 // from 1
	BaseSeq   uint64 // the record a delta applies to; Seq for a keyframe
	Prefix    uint64 // bytes of the base state a delta keeps
	StateHash uint64 // XXH64 of the state the record rebuilds
	ChainHash uint64 // Link(previous chain hash, this record)
	RawLen    uint64 // payload length
	StateLen  uint64 // length of the state the record rebuilds
}

var _ [64 - unsafe.Sizeof(RecordInfo{})]struct{} // RecordInfo must stay 64 bytes

// DefaultMaxReplay is the engine's bound on the deltas after a keyframe when ChainPolicy sets
// none (the store starts its state encoder over before the keyframe it forces).
const DefaultMaxReplay = 1000

// ChainPolicy says when a chain writes a keyframe instead of a delta. Zero fields take the
// engine's defaults (DefaultMaxReplay deltas at most after a keyframe; delta bytes since the
// keyframe at most 200% of the state's size).
type ChainPolicy struct {
	MaxReplay   uint32
	MaxDeltaPct uint32
}

// Chain is one harness's checkpoint chain: it turns each new state into the next record and
// replays records back into state, verifying every hash. One goroutine at a time.
type Chain interface {
	// Append makes the next record for state. prefixHint is how many leading bytes are known
	// to be unchanged since the previous state (0 when unknown; statefmt's BinaryEncoder
	// reports it); a wrong hint corrupts the chain. insertHint is how many bytes after that
	// prefix are known to be new, the rest of the previous state following them (the
	// encoder's Inserted; 0 when unknown): the delta's search starts after them. It is advice:
	// a wrong one costs only bytes. The payload is Go memory.
	Append(state []byte, prefixHint, insertHint int) (RecordInfo, []byte, error)
	// Push replays one record: a keyframe may start an empty chain, every other record must
	// follow the head, and hashes must match. On error (StatusInvalidRecord) the chain is reset
	// to empty.
	Push(info RecordInfo, payload []byte) error
	// Head is the last record appended or pushed (zero for an empty chain).
	Head() RecordInfo
	// State appends the current state to dst.
	State(dst []byte) []byte
	// Close releases the chain.
	Close() error
}

// AppendKeyframe makes the chain's next record a keyframe of state, whatever the policy would
// choose, and returns its header; the payload is state itself. It pushes the keyframe it builds,
// so the engine verifies it as it verifies any record it replays (every backend takes a keyframe
// on a live chain). On error the chain is empty, as after a failed Push.
func AppendKeyframe(c Chain, state []byte) (RecordInfo, error) {
	head := c.Head()
	info := RecordInfo{Kind: KindKeyframe, Seq: head.Seq + 1, BaseSeq: head.Seq + 1, StateHash: xxhash.Sum64(state),
		RawLen: uint64(len(state)), StateLen: uint64(len(state))}
	info.ChainHash = Link(head.ChainHash, info, state)
	return info, c.Push(info, state)
}

// Link is the chain hash of a record given the previous record's chain hash; every backend
// computes it identically (eternal::chain::link).
func Link(prev uint64, info RecordInfo, payload []byte) uint64 {
	var b [64]byte
	for i, f := range []uint64{prev, uint64(info.Kind), info.Seq, info.BaseSeq, info.Prefix,
		info.StateHash, info.StateLen, xxhash.Sum64(payload)} {
		binary.LittleEndian.PutUint64(b[i*8:], f)
	}
	return xxhash.Sum64(b[:])
}

// fallbackChain writes keyframe-only chains and replays any chain, in Go.
type fallbackChain struct {
	state []byte
	head  RecordInfo
	has   bool
}

func (fallbackEngine) NewChain(ChainPolicy) (Chain, error) { return &fallbackChain{}, nil }

func (c *fallbackChain) Append(state []byte, _, _ int) (RecordInfo, []byte, error) {
	seq := c.head.Seq + 1
	info := RecordInfo{Kind: KindKeyframe, Seq: seq, BaseSeq: seq, StateHash: xxhash.Sum64(state),
		RawLen: uint64(len(state)), StateLen: uint64(len(state))}
	payload := append([]byte(nil), state...)
	info.ChainHash = Link(c.head.ChainHash, info, payload)
	c.state = append(c.state[:0], state...)
	c.head, c.has = info, true
	return info, payload, nil
}

func (c *fallbackChain) fail(info RecordInfo, format string, args ...any) error {
	c.state, c.head, c.has = c.state[:0], RecordInfo{}, false
	return &EngineError{Status: StatusInvalidRecord, Backend: BackendFallback,
		Message: fmt.Sprintf("record %d: %s", info.Seq, fmt.Sprintf(format, args...))}
}

func (c *fallbackChain) Push(info RecordInfo, payload []byte) error {
	if info.RawLen != uint64(len(payload)) {
		return c.fail(info, "payload is %d bytes, the record says %d", len(payload), info.RawLen)
	}
	if c.has && info.Seq != c.head.Seq+1 {
		return c.fail(info, "does not follow the head (record %d)", c.head.Seq)
	}
	var next []byte
	switch info.Kind {
	case KindKeyframe:
		if info.Seq == 0 || info.BaseSeq != info.Seq || info.Prefix != 0 {
			return c.fail(info, "malformed keyframe header")
		}
		next = append([]byte(nil), payload...)
	case KindDelta:
		if !c.has || info.BaseSeq != c.head.Seq {
			return c.fail(info, "delta on record %d but the chain is at record %d", info.BaseSeq, c.head.Seq)
		}
		if info.Prefix > uint64(len(c.state)) {
			return c.fail(info, "keeps %d bytes of a %d-byte base", info.Prefix, len(c.state))
		}
		keep := int(info.Prefix)
		want := int(min(info.StateLen-min(info.StateLen, info.Prefix), 1<<34))
		tail, err := Fallback().ApplyDelta(nil, c.state[keep:], payload, want)
		if err != nil {
			msg := err.Error()
			if ee := (*EngineError)(nil); errors.As(err, &ee) {
				msg = ee.Message
			}
			return c.fail(info, "%s", msg)
		}
		next = append(append(make([]byte, 0, keep+len(tail)), c.state[:keep]...), tail...)
	default:
		return c.fail(info, "unknown record kind %d", info.Kind)
	}
	if uint64(len(next)) != info.StateLen {
		return c.fail(info, "rebuilt %d bytes, the record says %d", len(next), info.StateLen)
	}
	if h := xxhash.Sum64(next); h != info.StateHash {
		return c.fail(info, "state hash mismatch: rebuilt %016x, the record says %016x", h, info.StateHash)
	}
	if c.has || info.Kind == KindDelta {
		if want := Link(c.head.ChainHash, info, payload); want != info.ChainHash {
			return c.fail(info, "chain hash mismatch: computed %016x, the record says %016x", want, info.ChainHash)
		}
	}
	c.state, c.head, c.has = next, info, true
	return nil
}

func (c *fallbackChain) Head() RecordInfo        { return c.head }
func (c *fallbackChain) State(dst []byte) []byte { return append(dst, c.state...) }
func (c *fallbackChain) Close() error            { c.state = nil; return nil }
