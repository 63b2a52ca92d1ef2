package history

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Bytes is a byte string of a history (a payload, a cache key or value).
//
// JSON: a valid UTF-8 value is written as a plain JSON string ("abc"); any
// other value as an object {"base64": "<standard base64>"}. Both forms are
// read back to the same bytes, so arbitrary binary values survive a round
// trip while the ids a workload chooses stay readable. JSON null and an
// absent field read as nil; "" reads as a non-nil empty value.
type Bytes []byte

// String returns the bytes as a Go string (no decoding or escaping).
func (b Bytes) String() string { return string(b) }

// MarshalJSON implements json.Marshaler (see Bytes for the two forms).
func (b Bytes) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON implements json.Unmarshaler. Errors: any JSON value other than
// null, a string or an object with one "base64" member holding valid base64.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*b = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = append(Bytes{}, s...)
		return nil
	case len(data) > 0 && data[0] == '{':
		var obj struct {
			Base64 *string `json:"base64"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return err
		}
		if obj.Base64 == nil {
			return fmt.Errorf("byte string object without a \"base64\" member")
		}
		raw, err := base64.StdEncoding.DecodeString(*obj.Base64)
		if err != nil {
			return fmt.Errorf("byte string: %v", err)
		}
		*b = append(Bytes{}, raw...)
		return nil
	}
	return fmt.Errorf("byte string must be a JSON string or {\"base64\": ...}, got %.20s", data)
}
