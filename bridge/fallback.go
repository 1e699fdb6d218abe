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

func (fallbackEngine) ApplyDelta(base, delta []byte, maxTarget int) ([]byte, error) {
	return applyDelta(base, delta, maxTarget)
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

// applyDelta is the Go twin of eternal::delta::apply: the same checks, the same outcomes.
func applyDelta(base, delta []byte, maxTarget int) ([]byte, error) {
	r := deltaReader{buf: delta}
	_, baseLen, targetLen64, err := r.header()
	if err != nil {
		return nil, err
	}
	if baseLen != uint64(len(base)) {
		return nil, &EngineError{Status: StatusBaseMismatch, Backend: BackendFallback, Message: fmt.Sprintf(
			"delta was made for a base of %d bytes, but the base has %d bytes", baseLen, len(base))}
	}
	if maxTarget < 0 || targetLen64 > uint64(maxTarget) {
		return nil, &EngineError{Status: StatusTooLarge, Backend: BackendFallback, Message: fmt.Sprintf(
			"delta target of %d bytes exceeds the limit of %d bytes", targetLen64, maxTarget)}
	}
	targetLen := int(targetLen64)
	out := make([]byte, 0, min(targetLen, len(base)+len(delta)))
	var cursor int64
	for len(out) < targetLen {
		opAt := r.pos
		head, err := r.uvarint("op header")
		if err != nil {
			return nil, err
		}
		n := head >> 1
		remaining := uint64(targetLen - len(out))
		if n == 0 {
			return nil, r.fail(StatusInvalidDelta, opAt, "op of length 0")
		}
		if n > remaining {
			return nil, r.fail(StatusInvalidDelta, opAt, "op of %d bytes overruns the target (%d bytes left)", n, remaining)
		}
		if head&1 == 0 {
			if uint64(len(r.buf)-r.pos) < n {
				return nil, r.fail(StatusInvalidDelta, r.pos,
					"ADD literal of %d bytes runs past the end of the delta (%d bytes left)", n, len(r.buf)-r.pos)
			}
			out = append(out, r.buf[r.pos:r.pos+int(n)]...)
			r.pos += int(n)
			continue
		}
		u, err := r.uvarint("COPY offset")
		if err != nil {
			return nil, err
		}
		d := int64(u>>1) ^ -int64(u&1)
		// n <= remaining <= maxTarget fits in int64; cursor+d may overflow int64 only for forged
		// offsets, which the sign checks below then catch.
		off := cursor + d
		if (d > 0 && off < cursor) || (d < 0 && off > cursor) || off < 0 || uint64(off)+n > uint64(len(base)) {
			return nil, r.fail(StatusInvalidDelta, opAt,
				"COPY of %d bytes at base offset %d reads outside the base (%d bytes)", n, off, len(base))
		}
		out = append(out, base[off:off+int64(n)]...)
		cursor = off + int64(n)
	}
	if r.pos != len(r.buf) {
		return nil, r.fail(StatusInvalidDelta, r.pos, "%d trailing bytes after the target was complete", len(r.buf)-r.pos)
	}
	return out, nil
}
