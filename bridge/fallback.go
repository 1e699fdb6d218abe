package bridge

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// The delta format (version 1), mirrored from eternal/src/delta.rs, where it is specified:
//
//	delta := "ETD" version:u8=1 uvarint(base_len) uvarint(target_len) op*
//	op    := uvarint(head): head&1 == 0 ADD n=head>>1 literal bytes
//	                        head&1 == 1 COPY n=head>>1, svarint(d) from base cursor + d
const (
	deltaMagic         = "ETD"
	DeltaFormatVersion = 1
)

type fallbackEngine struct{}

// Fallback returns the pure-Go engine. It applies deltas from every backend and hashes like
// every backend, but encodes literal-only deltas (the whole target), which the checkpoint chain
// turns into keyframes.
func Fallback() Engine { return fallbackEngine{} }

func (fallbackEngine) Backend() Backend    { return BackendFallback }
func (fallbackEngine) ABIVersion() uint32  { return ABIVersion }
func (fallbackEngine) LiveBuffers() uint64 { return 0 }

func (fallbackEngine) Hash64(data []byte) uint64 { return xxhash.Sum64(data) }

func (fallbackEngine) NewEncoder() (Encoder, error) { return &literalEncoder{}, nil }

func (fallbackEngine) ApplyDelta(dst, base, delta []byte, maxTarget int) ([]byte, error) {
	n, err := checkDelta(len(base), delta, maxTarget)
	if err != nil {
		return dst, err
	}
	whole, tail := extend(dst, n, base, delta)
	if err := applyDeltaInto(base, delta, tail); err != nil {
		return dst, err
	}
	return whole, nil
}

type literalEncoder struct{ closed bool }

func (e *literalEncoder) Encode(base, target []byte) ([]byte, error) {
	if e.closed {
		return nil, ErrClosed
	}
	return EncodeLiteral(len(base), target), nil
}

func (e *literalEncoder) Close() error { e.closed = true; return nil }

// EncodeLiteral returns the delta that rebuilds target from a base of baseLen bytes with one ADD
// op, byte for byte what the engine's encode_literal writes.
func EncodeLiteral(baseLen int, target []byte) []byte {
	out := make([]byte, 0, len(target)+3*binary.MaxVarintLen64+len(deltaMagic)+1)
	out = append(out, deltaMagic...)
	out = append(out, DeltaFormatVersion)
	out = binary.AppendUvarint(out, uint64(baseLen))
	out = binary.AppendUvarint(out, uint64(len(target)))
	if len(target) > 0 {
		out = binary.AppendUvarint(out, uint64(len(target))<<1)
		out = append(out, target...)
	}
	return out
}

// DeltaHeader reads the lengths a delta declares, checking magic and version.
func DeltaHeader(delta []byte) (baseLen, targetLen uint64, err error) {
	r := deltaReader{buf: delta}
	_, baseLen, targetLen, err = r.header()
	return baseLen, targetLen, err
}

type deltaReader struct {
	buf []byte
	pos int
}

func (r *deltaReader) fail(status Status, at int, format string, args ...any) error {
	return &EngineError{
		Status:  status,
		Backend: BackendFallback,
		Message: fmt.Sprintf("invalid delta at byte %d: %s", at, fmt.Sprintf(format, args...)),
	}
}

func (r *deltaReader) uvarint(what string) (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		if r.pos >= len(r.buf) {
			return 0, r.fail(StatusInvalidDelta, r.pos, "truncated %s", what)
		}
		b := r.buf[r.pos]
		if i == 9 && b > 1 {
			return 0, r.fail(StatusInvalidDelta, r.pos, "%s overflows 64 bits", what)
		}
		r.pos++
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, r.fail(StatusInvalidDelta, r.pos, "%s is longer than 10 bytes", what)
}

func (r *deltaReader) header() (start int, baseLen, targetLen uint64, err error) {
	if len(r.buf) < 4 {
		return 0, 0, 0, r.fail(StatusInvalidDelta, 0, "%d bytes is too short for a delta header", len(r.buf))
	}
	if string(r.buf[:3]) != deltaMagic {
		return 0, 0, 0, r.fail(StatusInvalidDelta, 0, "bad magic (not an Eternal delta)")
	}
	if r.buf[3] != DeltaFormatVersion {
		return 0, 0, 0, r.fail(StatusInvalidDelta, 3,
			"delta format version %d is not supported (supported: %d)", r.buf[3], DeltaFormatVersion)
	}
	r.pos = 4
	if baseLen, err = r.uvarint("base length"); err != nil {
		return 0, 0, 0, err
	}
	if targetLen, err = r.uvarint("target length"); err != nil {
		return 0, 0, 0, err
	}
	return r.pos, baseLen, targetLen, nil
}

// deltaOp is one validated op: a literal, or a copy of base[off:off+n].
type deltaOp struct {
	lit    []byte
	off, n int
}

// walkDelta is the Go twin of eternal::delta::walk: the same checks, in the same order, with the
// same outcomes. f sees each op, with the target offset it writes at, once it is known valid.
func walkDelta(r *deltaReader, baseLen, targetLen int, f func(at int, op deltaOp)) error {
	produced := 0
	var cursor int64
	for produced < targetLen {
		opAt := r.pos
		head, err := r.uvarint("op header")
		if err != nil {
			return err
		}
		n := head >> 1
		remaining := uint64(targetLen - produced)
		if n == 0 {
			return r.fail(StatusInvalidDelta, opAt, "op of length 0")
		}
		if n > remaining {
			return r.fail(StatusInvalidDelta, opAt, "op of %d bytes overruns the target (%d bytes left)", n, remaining)
		}
		if head&1 == 0 {
			if uint64(len(r.buf)-r.pos) < n {
				return r.fail(StatusInvalidDelta, r.pos,
					"ADD literal of %d bytes runs past the end of the delta (%d bytes left)", n, len(r.buf)-r.pos)
			}
			f(produced, deltaOp{lit: r.buf[r.pos : r.pos+int(n)]})
			r.pos += int(n)
		} else {
			u, err := r.uvarint("COPY offset")
			if err != nil {
				return err
			}
			d := int64(u>>1) ^ -int64(u&1)
			// A forged offset may overflow int64 here; the sign checks catch that.
			off := cursor + d
			if (d > 0 && off < cursor) || (d < 0 && off > cursor) || off < 0 || uint64(off)+n > uint64(baseLen) {
				return r.fail(StatusInvalidDelta, opAt,
					"COPY of %d bytes at base offset %d reads outside the base (%d bytes)", n, off, baseLen)
			}
			f(produced, deltaOp{off: int(off), n: int(n)})
			cursor = off + int64(n)
		}
		produced += int(n)
	}
	if r.pos != len(r.buf) {
		return r.fail(StatusInvalidDelta, r.pos, "%d trailing bytes after the target was complete", len(r.buf)-r.pos)
	}
	return nil
}

// openDelta reads the header and checks it against the base length and a target limit.
func openDelta(delta []byte, baseLen, maxTarget int) (*deltaReader, int, error) {
	r := &deltaReader{buf: delta}
	_, bl, tl, err := r.header()
	if err != nil {
		return nil, 0, err
	}
	if bl != uint64(baseLen) {
		return nil, 0, &EngineError{Status: StatusBaseMismatch, Backend: BackendFallback, Message: fmt.Sprintf(
			"delta was made for a base of %d bytes, but the base has %d bytes", bl, baseLen)}
	}
	if maxTarget < 0 || tl > uint64(maxTarget) {
		return nil, 0, &EngineError{Status: StatusTooLarge, Backend: BackendFallback, Message: fmt.Sprintf(
			"delta target of %d bytes exceeds the limit of %d bytes", tl, maxTarget)}
	}
	return r, int(tl), nil
}

// checkDelta validates a whole delta without producing the target and returns its length.
func checkDelta(baseLen int, delta []byte, maxTarget int) (int, error) {
	r, n, err := openDelta(delta, baseLen, maxTarget)
	if err != nil {
		return 0, err
	}
	return n, walkDelta(r, baseLen, n, func(int, deltaOp) {})
}

// applyDeltaInto writes the target into out, which must be exactly the checked target length.
func applyDeltaInto(base, delta, out []byte) error {
	r, n, err := openDelta(delta, len(base), len(out))
	if err != nil {
		return err
	}
	return walkDelta(r, len(base), n, func(at int, op deltaOp) {
		if op.lit != nil {
			copy(out[at:], op.lit)
		} else {
			copy(out[at:at+op.n], base[op.off:op.off+op.n])
		}
	})
}
