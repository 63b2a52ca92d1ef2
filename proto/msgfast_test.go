package proto

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

// fastBodies are requests in the plain form the fast path must take.
var fastBodies = []string{
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":4}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k"}`,
	` { "key" : "k" , "cache":"c","namespace":"n","tenant_id":"t","type":"cache_get","request_id":null }` + "\n",
	`{"type":"cache_delete","tenant_id":"t1","namespace":"default","cache":"c","key":"ключ","request_id":18446744073709551615}`,
	`{"type":"counter_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":0}`,
	`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"aGVsbG8=","request_id":7,"ttl_ms":null}`,
	`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"","ttl_ms":1000}`,
	`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":-9223372036854775808,"request_id":1}`,
	`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":9223372036854775807}`,
	`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"aGk=","request_id":3}`,
	`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":null}`,
	`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":""}`,
	`{"type":"cache_deleted","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":null,"request_id":2}`,
	`{"type":"counter_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":-5,"request_id":2}`,
	`{"type":"cache_ok","request_id":12}`,
}

// slowBodies must go to encoding/json (they are unusual or wrong).
var slowBodies = []string{
	`{"type":"cache_get","tenant_id":"t\u0031","namespace":"default","cache":"c","key":"k"}`,  // escape
	`{"type":"cache_get","Tenant_ID":"t1","namespace":"default","cache":"c","key":"k"}`,       // other case
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","x":1}`, // unknown key
	`{"type":"cache_get","tenant_id":"t1","tenant_id":"t2","namespace":"default","cache":"c","key":"k"}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c"}`,           // key missing
	`{"type":"cache_get","tenant_id":null,"namespace":"default","cache":"c","key":"k"}`, // null required
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":-1}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":1.5}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":01}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":18446744073709551616}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k"} x`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k",}`,
	`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"aGVsbG8","ttl_ms":null}`, // bad base64
	`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"aGVsbG8="}`,              // ttl_ms absent
	`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":null,"ttl_ms":null}`,
	`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":9223372036854775808}`,
	`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":1e3}`,
	`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":true}`,
	`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":1}`,
	`{"type":"publish","tenant_id":"t1","namespace":"default","stream":"s","payload":""}`,
	`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k"}`,                // value absent
	`{"type":"counter_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":null}`, // null required
	`{"type":"counter_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"aGk="}`,
	`{"type":"cache_ok","request_id":null}`,
	`{"type":"cache_ok"}`,
	`{"type":"cache_ok","request_id":1,"key":"k"}`,
	`{"type":"cache_ok","request_id":1,"ttl_ms":null}`,
	`{"type":1}`,
	`{}`,
	`[]`,
	``,
}

// checkFastAgrees fails when the fast path accepts body but encoding/json decodes it to
// something else or rejects it.
func checkFastAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := decodeMessageFast(body)
	if !ok {
		return false
	}
	slow, err := decodeMessageJSON(body)
	if err != nil {
		t.Fatalf("fast path took %s; encoding/json: %v", body, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s\nfast %#v\nslow %#v", body, fast, slow)
	}
	return true
}

func TestDecodeMessageFastAgreesWithJSON(t *testing.T) {
	for _, b := range fastBodies {
		if !checkFastAgrees(t, []byte(b)) {
			t.Errorf("fast path refused %s", b)
		}
	}
	for _, b := range slowBodies {
		if _, ok := decodeMessageFast([]byte(b)); ok {
			t.Errorf("fast path took %s", b)
		}
	}
	for _, m := range sampleMessages() {
		checkFastAgrees(t, m.AppendJSON(nil))
	}
}

func TestDecodeMessageFastErrorsAsBefore(t *testing.T) {
	for _, b := range slowBodies {
		m1, err1 := DecodeMessage([]byte(b))
		m2, err2 := decodeMessageJSON([]byte(b))
		if !reflect.DeepEqual(m1, m2) || (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Errorf("%s: DecodeMessage %v %v, encoding/json %v %v", b, m1, err1, m2, err2)
		}
	}
}

func FuzzDecodeMessageFast(f *testing.F) {
	for _, b := range fastBodies {
		f.Add([]byte(b))
	}
	for _, b := range slowBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if utf8.Valid(b) {
			checkFastAgrees(t, b)
		}
	})
}

// BenchmarkDecodeCacheMessages compares DecodeMessage (fast path) with encoding/json for a
// request the broker reads and an answer the client reads.
func BenchmarkDecodeCacheMessages(b *testing.B) {
	for _, c := range []struct {
		name string
		body string
	}{{"cache_get", fastBodies[0]}, {"cache_put", fastBodies[5]}, {"cache_value", fastBodies[9]}} {
		body := []byte(c.body)
		b.Run(c.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeMessage(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeMessageJSON(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
