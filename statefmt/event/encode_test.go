package event_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// pieces are what randomText strings together: plain text, every character encoding/json
// escapes, invalid UTF-8, multi-byte runes and the two separators JSON allows but JavaScript
// does not.
var pieces = []string{"step", " ", "read_file", "é", "日本", "🦀", "<", ">", "&", `"`, `\`, "\n", "\r", "\t",
	"\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "\xff", "\xe2\x80", "\u2028", "\u2029", "\ufffd", "/", "'"}

func randomText(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return ""
	}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.Ldexp(r.Float64(), -r.IntN(80)) // down to far below 1e-6
	case 2:
		return math.Ldexp(r.Float64(), 40+r.IntN(60)) // around and past 1e21
	case 3:
		return -r.Float64() * 1000
	case 4:
		return float64(r.IntN(100000)) / 1000
	case 5:
		return 1e-6 * float64(1+r.IntN(3)) // on the edge of the exponent form
	case 6:
		return 1e21
	}
	return r.NormFloat64() * 1e6
}

func randomEvent(r *rand.Rand) event.Event {
	someInt := func() int {
		if r.IntN(3) == 0 {
			return 0
		}
		return r.IntN(1<<20) - 1<<10
	}
	zone := time.FixedZone("", (r.IntN(48)-24)*1800)
	e := event.Event{
		Type:        event.Type(randomText(r)),
		HarnessID:   randomText(r),
		Time:        time.Unix(r.Int64N(1<<36)-1<<34, r.Int64N(1e9)).In(zone),
		N:           uint64(someInt() & 0xfffff),
		From:        statefmt.Status(randomText(r)),
		To:          statefmt.Status(randomText(r)),
		Reason:      randomText(r),
		StepID:      randomText(r),
		Attempt:     someInt(),
		Steps:       someInt(),
		DelayMs:     randomFloat(r),
		Tool:        randomText(r),
		DurationMs:  randomFloat(r),
		Seq:         r.Uint64() >> r.IntN(64),
		Kind:        randomText(r),
		StoredBytes: someInt(),
		GateID:      randomText(r),
		Action:      randomText(r),
		WaitMs:      randomFloat(r),
		Outcome:     randomText(r),
		SubAgentID:  randomText(r),
		Agent:       randomText(r),
		Iteration:   someInt(),
		Phase:       randomText(r),
		CPUMs:       randomFloat(r),
		RSSBytes:    int64(someInt()) << r.IntN(30),
		By:          randomText(r),
		Message:     randomText(r),
	}
	if r.IntN(2) == 0 {
		ok := r.IntN(2) == 0
		e.Success = &ok
	}
	if r.IntN(2) == 0 {
		code := someInt()
		e.ExitCode = &code
	}
	switch r.IntN(3) {
	case 0:
		e.Blocked = []string{}
	case 1:
		for range 1 + r.IntN(4) {
			e.Blocked = append(e.Blocked, randomText(r))
		}
	}
	if r.IntN(2) == 0 {
		e.Usage = &event.Usage{}
		if r.IntN(4) > 0 {
			*e.Usage = event.Usage{InputTokens: int64(someInt()), OutputTokens: int64(someInt()), CacheReadTokens: int64(someInt()),
				CacheWriteTokens: int64(someInt()), CostUSD: randomFloat(r), SessionID: randomText(r), Model: randomText(r)}
		}
	}
	return e
}

// The log's encoding is encoding/json's, byte for byte, on any event: the escaping of every
// character JSON and HTML care about, invalid UTF-8, floats in and out of the exponent form,
// omitted zero fields, times in any zone.
func TestPropertyEncodeWritesWhatEncodingJSONWrites(t *testing.T) {
	ps := proptest.Props(t, 2000)
	ps.Property("Encode equals json.Marshal", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			e := randomEvent(rand.New(rand.NewPCG(seed, 1)))
			want, werr := json.Marshal(e)
			got, gerr := event.Encode(e)
			if werr != nil || gerr != nil || string(got) != string(want) {
				return "event " + string(want) + "\nencoded " + string(got) + "\n" + errText(werr) + " / " + errText(gerr)
			}
			return ""
		})
	}, gen.UInt64()))
	ps.TestingRun(t)
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// Every field of an event is written: an event whose every field (and every field of its usage)
// is set encodes as encoding/json encodes it. A field added to Event and not to the encoder
// fails here, whatever its type.
func TestEncodeWritesEveryFieldOfAnEvent(t *testing.T) {
	var e event.Event
	fill(t, reflect.ValueOf(&e).Elem())
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := event.Encode(e)
	if err != nil || string(got) != string(want) {
		t.Fatalf("encoded %s (%v)\nwant    %s", got, err, want)
	}
}

// fill sets every field of v to a value that is not its zero.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x<&>\u2028" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(-7)
	case reflect.Uint64:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5e-7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i))
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 4, 5, 6, 7, time.FixedZone("", 3600))))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	default:
		t.Fatalf("a field of kind %s: fill it here and encode it", v.Kind())
	}
}

// What encoding/json refuses, Encode refuses: a time past year 9999, NaN, an infinity.
func TestEncodeRefusesWhatJSONCannotHold(t *testing.T) {
	base := event.Event{Type: event.Warning, HarnessID: "h", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for name, e := range map[string]event.Event{
		"year 10000": {Type: base.Type, HarnessID: "h", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"NaN":        {Type: base.Type, HarnessID: "h", Time: base.Time, CPUMs: math.NaN()},
		"+Inf":       {Type: base.Type, HarnessID: "h", Time: base.Time, WaitMs: math.Inf(1)},
		"-Inf cost":  {Type: base.Type, HarnessID: "h", Time: base.Time, Usage: &event.Usage{CostUSD: math.Inf(-1)}},
	} {
		if _, err := json.Marshal(e); err == nil {
			t.Fatalf("%s: encoding/json took it", name)
		}
		if b, err := event.Encode(e); err == nil {
			t.Errorf("%s: encoded as %s", name, b)
		}
	}
}
