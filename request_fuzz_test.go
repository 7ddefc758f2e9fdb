package magpie

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
)

// FuzzUnmarshalRequest checks that decoding a queue entry never panics, that
// a refusal is ErrUndecodableRequest, and that for any entry it accepts,
// Marshal→Unmarshal is stable: a request that went through the queue once
// comes back the same every later time (its ID aside, which is per process).
func FuzzUnmarshalRequest(f *testing.F) {
	c := NewCollector()
	seed := func(method, u string, body []byte, ctx map[string]string) []byte {
		hdr := http.Header{"X-Seed": {"1"}}
		r, err := c.newRequest(u, method, 2, nil, nil, hdr)
		if err != nil {
			f.Fatal(err)
		}
		if body != nil {
			r.bodyBytes = body
		}
		for k, v := range ctx {
			r.Ctx.Put(k, v)
		}
		b, err := r.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed(http.MethodGet, "http://example.com/a?b=c#d", nil, nil))
	f.Add(seed(http.MethodPost, "https://example.com/form", []byte("a=1&b=2"), map[string]string{"k": "v"}))
	f.Add([]byte(`{"URL":"http://[::1]:80/%zz","Method":"","Depth":-1,"Body":"","Attempt":7,"Admitted":true,"Marked":true}`))
	f.Add([]byte(`{"URL":"%"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := c.UnmarshalRequest(data)
		if err != nil {
			if !errors.Is(err, ErrUndecodableRequest) {
				t.Fatalf("UnmarshalRequest(%q) error = %v, want errors.Is ErrUndecodableRequest", data, err)
			}
			return
		}
		once, err := r.Marshal()
		if err != nil {
			t.Fatalf("Marshal() of a decoded request error = %v", err)
		}
		r2, err := c.UnmarshalRequest(once)
		if err != nil {
			t.Fatalf("UnmarshalRequest(Marshal()) = %v, want nil (input %q)", err, data)
		}
		twice, err := r2.Marshal()
		if err != nil {
			t.Fatalf("second Marshal() error = %v", err)
		}
		a, b := decodeSerialized(t, once), decodeSerialized(t, twice)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("round trip not stable for %q:\n once  %s\n twice %s", data, once, twice)
		}
	})
}

// decodeSerialized decodes Marshal's output with the per-process ID zeroed.
func decodeSerialized(t *testing.T, b []byte) serializableRequest {
	t.Helper()
	var sr serializableRequest
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatalf("Marshal() produced invalid JSON %q: %v", b, err)
	}
	sr.ID = 0
	return sr
}
