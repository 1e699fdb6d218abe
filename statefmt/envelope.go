package statefmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// EnvelopeVersion is the checkpoint record envelope layout this build writes. Versions only ever
// grow; a retired one stays reserved here.
const EnvelopeVersion = 1

// RecordKind says how a record rebuilds its state.
type RecordKind uint8

const (
	// KindKeyframe: the payload is the whole state encoding.
	KindKeyframe RecordKind = 1
	// KindDelta: the state is the base state's first Prefix bytes followed by the engine delta in
	// the payload applied to the rest of the base state.
	KindDelta RecordKind = 2
)

// String is stable: `inspect` prints it.
func (k RecordKind) String() string {
	switch k {
	case KindKeyframe:
		return "keyframe"
	case KindDelta:
		return "delta"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Compression says how the payload is stored.
type Compression uint8

const (
	CompressionNone Compression = 0
	// CompressionZstd: the payload is one complete zstd frame.
	CompressionZstd Compression = 1
	// CompressionZstdStreamStart: the payload starts a zstd stream (a frame left open) that
	// the following CompressionZstdStream records continue; each payload ends at a flush, so the
	// records up to any point decompress to exactly their raw lengths.
	CompressionZstdStreamStart Compression = 2
	// CompressionZstdStream: the payload continues the stream of the previous record.
	CompressionZstdStream Compression = 3
	// CompressionZstdFrames: the payload is a frame table and independent zstd frames, so a
	// large keyframe decompresses on several cores (see Frames).
	CompressionZstdFrames Compression = 4
)

// String is stable: `inspect` prints it.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	case CompressionZstdStreamStart:
		return "zstd-stream-start"
	case CompressionZstdStream:
		return "zstd-stream"
	case CompressionZstdFrames:
		return "zstd-frames"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Record is one checkpoint record: header fields and the (possibly compressed) payload.
type Record struct {
	Kind RecordKind
	// Seq is this record's sequence number in the harness's chain (from 1).
	Seq uint64
	// BaseSeq is the record a delta applies to (Seq-1 for a delta; Seq itself for a keyframe).
	BaseSeq uint64
	// Prefix is, for a delta, how many leading bytes of the base state are kept as they are.
	Prefix uint64
	// StateHash is XXH64 of the full state encoding this record rebuilds.
	StateHash uint64
	// ChainHash links this record to the previous one (see the checkpoint store).
	ChainHash uint64
	// Compression of the payload, and the payload's uncompressed length.
	Compression Compression
	RawLen      uint64
	// StateFormat is the binary state format version; DeltaFormat the engine delta version (0
	// for a keyframe).
	StateFormat uint8
	DeltaFormat uint8
	Payload     []byte
}

const (
	envelopeMagic = "HER"
	// MaxRawLen bounds a record's declared uncompressed size (1 GiB): a forged length can never
	// make a reader allocate more.
	MaxRawLen = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The envelope layout, version 1:
//
//	"HER" version:u8 kind:u8 compression:u8 stateFormat:u8 deltaFormat:u8
//	uvarint seq, baseSeq, prefix, rawLen, payloadLen
//	u64le stateHash, u64le chainHash
//	payload
//	u32le CRC-32C of every byte before it
//
// The checksum covers header and payload, so any flipped bit in a record is detected.

// EncodeRecord appends the envelope of rec to dst.
func EncodeRecord(dst []byte, rec *Record) []byte {
	start := len(dst)
	dst = append(dst, envelopeMagic...)
	dst = append(dst, EnvelopeVersion, byte(rec.Kind), byte(rec.Compression), rec.StateFormat, rec.DeltaFormat)
	for _, v := range []uint64{rec.Seq, rec.BaseSeq, rec.Prefix, rec.RawLen, uint64(len(rec.Payload))} {
		dst = binary.AppendUvarint(dst, v)
	}
	dst = binary.LittleEndian.AppendUint64(dst, rec.StateHash)
	dst = binary.LittleEndian.AppendUint64(dst, rec.ChainHash)
	dst = append(dst, rec.Payload...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// RecordError is an envelope decoding failure.
type RecordError struct {
	Offset int
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("invalid checkpoint record at byte %d: %s", e.Offset, e.Reason)
}

// DecodeRecord decodes one envelope, verifying its checksum first. The payload aliases b.
func DecodeRecord(b []byte) (*Record, error) {
	const fixed = 8 // magic, version, kind, compression, stateFormat, deltaFormat
	if len(b) < fixed+5+16+4 {
		return nil, &RecordError{0, fmt.Sprintf("%d bytes is too short for a checkpoint record", len(b))}
	}
	body := b[:len(b)-4]
	if want, got := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, &RecordError{len(b) - 4, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x): the record is corrupt", want, got)}
	}
	if string(b[:3]) != envelopeMagic {
		return nil, &RecordError{0, "bad magic (not a checkpoint record)"}
	}
	if b[3] > EnvelopeVersion {
		return nil, &RecordError{3, fmt.Sprintf("envelope version %d is not supported (supported: %d): %s", b[3], EnvelopeVersion, NewerBuild)}
	}
	if b[3] != EnvelopeVersion {
		return nil, &RecordError{3, fmt.Sprintf("envelope version %d is not supported (supported: %d)", b[3], EnvelopeVersion)}
	}
	rec := &Record{Kind: RecordKind(b[4]), Compression: Compression(b[5]), StateFormat: b[6], DeltaFormat: b[7]}
	if rec.Kind != KindKeyframe && rec.Kind != KindDelta {
		return nil, &RecordError{4, fmt.Sprintf("record kind %d is not keyframe (1) or delta (2)", b[4])}
	}
	if rec.Compression > CompressionZstdFrames {
		return nil, &RecordError{5, fmt.Sprintf("compression %d is not none (0), zstd (1), zstd-stream-start (2), zstd-stream (3) or zstd-frames (4)", b[5])}
	}
	pos := fixed
	var vals [5]uint64
	for i, name := range []string{"seq", "baseSeq", "prefix", "rawLen", "payloadLen"} {
		v, n := binary.Uvarint(body[pos:])
		if n <= 0 {
			return nil, &RecordError{pos, name + ": truncated or overlong varint"}
		}
		vals[i], pos = v, pos+n
	}
	rec.Seq, rec.BaseSeq, rec.Prefix, rec.RawLen = vals[0], vals[1], vals[2], vals[3]
	payloadLen := vals[4]
	if rec.RawLen > MaxRawLen {
		return nil, &RecordError{pos, fmt.Sprintf("declared size %d exceeds the %d-byte limit", rec.RawLen, MaxRawLen)}
	}
	if len(body)-pos < 16 {
		return nil, &RecordError{pos, "truncated before the hashes"}
	}
	rec.StateHash = binary.LittleEndian.Uint64(body[pos:])
	rec.ChainHash = binary.LittleEndian.Uint64(body[pos+8:])
	pos += 16
	if payloadLen != uint64(len(body)-pos) {
		return nil, &RecordError{pos, fmt.Sprintf("payload length %d does not match the %d bytes present", payloadLen, len(body)-pos)}
	}
	if rec.Compression == CompressionNone && payloadLen != rec.RawLen {
		return nil, &RecordError{pos, fmt.Sprintf("uncompressed payload of %d bytes declares %d", payloadLen, rec.RawLen)}
	}
	switch {
	case rec.Seq == 0:
		return nil, &RecordError{fixed, "sequence number 0 (chains start at 1)"}
	case rec.Kind == KindKeyframe && (rec.BaseSeq != rec.Seq || rec.Prefix != 0 || rec.DeltaFormat != 0):
		return nil, &RecordError{fixed, "keyframe with a base sequence, prefix or delta format"}
	case rec.Kind == KindDelta && rec.BaseSeq >= rec.Seq:
		return nil, &RecordError{fixed, fmt.Sprintf("delta %d has base %d (bases come before)", rec.Seq, rec.BaseSeq)}
	}
	rec.Payload = body[pos:]
	return rec, nil
}

// Frame is one independently compressed piece of a CompressionZstdFrames payload.
type Frame struct {
	RawOffset, RawLen int    // where its bytes go in the raw payload
	Data              []byte // the zstd frame (a slice of the payload)
}

// maxFrames bounds a frame table (a 1 GiB payload in 1 MiB frames).
const maxFrames = 1 << 10

// AppendFrameTable writes the header of a CompressionZstdFrames payload: uvarint n (1..1024),
// then n uvarint raw lengths, then n uvarint compressed lengths. The frames follow, in order.
func AppendFrameTable(dst []byte, rawLens, zLens []int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rawLens)))
	for _, n := range rawLens {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	for _, n := range zLens {
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	return dst
}

// Frames splits a CompressionZstdFrames payload into its frames, checking that the table is
// well formed, that the frames exactly fill the payload and that the raw lengths add up to
// rawLen. It never panics and allocates in proportion to the table's (bounded) size.
func Frames(payload []byte, rawLen uint64) ([]Frame, error) {
	pos := 0
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(payload[pos:])
		if n <= 0 {
			return 0, fmt.Errorf("frame table: %s at byte %d: truncated or overlong varint", what, pos)
		}
		pos += n
		return v, nil
	}
	n, err := next("frame count")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > maxFrames || n > uint64(len(payload)) {
		return nil, fmt.Errorf("frame table: %d frames is outside 1..%d or longer than the payload", n, maxFrames)
	}
	frames := make([]Frame, n)
	var raw uint64
	for i := range frames {
		v, err := next("raw length")
		if err != nil {
			return nil, err
		}
		if v > rawLen-raw {
			return nil, fmt.Errorf("frame table: raw lengths exceed the record's %d bytes", rawLen)
		}
		frames[i].RawOffset, frames[i].RawLen = int(raw), int(v)
		raw += v
	}
	if raw != rawLen {
		return nil, fmt.Errorf("frame table: raw lengths add up to %d, the record says %d", raw, rawLen)
	}
	lens := make([]uint64, n)
	for i := range lens {
		if lens[i], err = next("compressed length"); err != nil {
			return nil, err
		}
	}
	for i, l := range lens {
		if l > uint64(len(payload)-pos) {
			return nil, fmt.Errorf("frame table: frame %d of %d bytes runs past the payload's end", i, l)
		}
		frames[i].Data = payload[pos : pos+int(l)]
		pos += int(l)
	}
	if pos != len(payload) {
		return nil, fmt.Errorf("frame table: %d bytes after the last frame", len(payload)-pos)
	}
	return frames, nil
}
