package statefmt

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSONValue is a free-form JSON value (tool arguments, structured results, handoff state) in
// canonical form: compact, object keys sorted, numbers exactly as written, no HTML escaping.
// nil means absent. Build one with CanonicalJSON or JSONOf so that equal values have equal bytes.
type JSONValue []byte

// CanonicalJSON validates raw JSON and returns its canonical form.
func CanonicalJSON(raw []byte) (JSONValue, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON value: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON value: more than one value")
	}
	return JSONOf(v)
}

// JSONOf returns the canonical JSON of a Go value (maps are written with sorted keys).
func JSONOf(v any) (JSONValue, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return JSONValue(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// MarshalJSON writes the value as is (it is already canonical); nil writes null.
func (v JSONValue) MarshalJSON() ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON canonicalises the value it is given; null reads as absent (nil).
func (v *JSONValue) UnmarshalJSON(raw []byte) error {
	if string(raw) == "null" {
		*v = nil
		return nil
	}
	c, err := CanonicalJSON(raw)
	if err != nil {
		return err
	}
	*v = c
	return nil
}
