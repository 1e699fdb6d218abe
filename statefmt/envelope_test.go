package statefmt_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/statefmt"
)

func TestEnvelopeRefuses(t *testing.T) {
	base := statefmt.Record{Kind: statefmt.KindDelta, Seq: 5, BaseSeq: 4, Prefix: 100, StateHash: 1, ChainHash: 2,
		Compression: statefmt.CompressionZstd, RawLen: 10, StateFormat: 1, DeltaFormat: 1, Payload: []byte("payload")}
	good := statefmt.EncodeRecord(nil, &base)
	if _, err := statefmt.DecodeRecord(good); err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, err := statefmt.DecodeRecord(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	for _, c := range []struct {
		name string
		mod  func(r *statefmt.Record)
		want string
	}{
		{"seq 0", func(r *statefmt.Record) { r.Seq, r.BaseSeq = 0, 0 }, "sequence number 0"},
		{"delta base after it", func(r *statefmt.Record) { r.BaseSeq = 9 }, "bases come before"},
		{"keyframe with prefix", func(r *statefmt.Record) { r.Kind, r.BaseSeq, r.DeltaFormat = statefmt.KindKeyframe, 5, 0 }, "keyframe with"},
		{"unknown kind", func(r *statefmt.Record) { r.Kind = 9 }, "record kind 9"},
		{"unknown compression", func(r *statefmt.Record) { r.Compression = 9 }, "compression 9"},
		{"huge raw length", func(r *statefmt.Record) { r.RawLen = statefmt.MaxRawLen + 1 }, "exceeds"},
		{"uncompressed length mismatch", func(r *statefmt.Record) { r.Compression = statefmt.CompressionNone }, "declares"},
	} {
		r := base
		c.mod(&r)
		_, err := statefmt.DecodeRecord(statefmt.EncodeRecord(nil, &r))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	bad := bytes.Clone(good)
	bad[len(bad)-6] ^= 0x10
	if _, err := statefmt.DecodeRecord(bad); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("flipped payload bit: %v", err)
	}
	if statefmt.KindKeyframe.String() != "keyframe" || statefmt.KindDelta.String() != "delta" || statefmt.CompressionZstd.String() != "zstd" {
		t.Fatal("String() changed: inspect output depends on it")
	}
}

func TestFrames(t *testing.T) {
	payload := statefmt.AppendFrameTable(nil, []int{3, 0, 2}, []int{1, 2, 3})
	body := []byte("abbccc")
	frames, err := statefmt.Frames(append(payload, body...), 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []statefmt.Frame{{0, 3, []byte("a")}, {3, 0, []byte("bb")}, {3, 2, []byte("ccc")}}
	if !reflect.DeepEqual(frames, want) {
		t.Fatalf("frames %+v, want %+v", frames, want)
	}
	for _, c := range []struct {
		name    string
		payload []byte
		rawLen  uint64
		want    string
	}{
		{"empty", nil, 0, "truncated"},
		{"no frames", []byte{0}, 0, "outside 1..1024"},
		{"count past the payload", []byte{9, 1}, 1, "outside"},
		{"raw lengths short", append(statefmt.AppendFrameTable(nil, []int{2}, []int{1}), 'x'), 3, "add up to 2"},
		{"raw lengths long", append(statefmt.AppendFrameTable(nil, []int{4}, []int{1}), 'x'), 3, "exceed"},
		{"frame past the end", append(statefmt.AppendFrameTable(nil, []int{3}, []int{5}), 'x'), 3, "runs past"},
		{"bytes after the frames", append(statefmt.AppendFrameTable(nil, []int{3}, []int{1}), 'x', 'y'), 3, "after the last frame"},
		{"truncated table", statefmt.AppendFrameTable(nil, []int{3, 4}, []int{1, 1})[:3], 7, "truncated"},
	} {
		if _, err := statefmt.Frames(c.payload, c.rawLen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
