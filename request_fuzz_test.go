package magpie

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
)

// FuzzUnmarshalRequest checks that decoding a queue entry never panics, that
// a refusal is ErrUndecodableRequest, and that for any entry it accepts,
// Marshal→Unmarshal is stable: a request that went through the queue once
// comes back the same every later time, byte for byte.
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
	// The compact form Marshal writes since entries leave out empty fields.
	f.Add([]byte(`{"URL":"http://example.com/p?a=1&b=2","Depth":1}`))
	f.Add([]byte(`{"URL":"http://example.com/f","Method":"POST","Depth":2,"Body":"","Attempt":2,"CheckRevisit":true,"Admitted":true,"Marked":true,"Parent":"http://example.com/"}`))
	f.Add([]byte(`{"URL":"http://example.com/","Depth":3,"Body":"AP8=","Ctx":{"\u2028k":"a\"b\\\n\u0000\ufffd"},"Headers":{"X-A":["1",""],"X-N":null},"Host":"v\th","Sitemap":true,"SitemapLevel":1,"SitemapFor":"http://example.com/s.xml"}`))
	// Today's full form, as earlier versions stored it in SQLite and Redis.
	f.Add([]byte(`{"URL":"http://example.com/p/1","Method":"GET","Depth":1,"Body":null,"ID":12,"Ctx":{},"Headers":{},"Host":""}`))
	f.Add([]byte(`{"URL":"http://example.com/","Depth":-0,"Attempt":01,"Marked":false,"Sitemap":true,"SitemapLevel":123456789012345678}`))
	f.Add([]byte(`{"URL":"http://example.com/","URL":"http://example.com/b","url":"c","Depth":1e2}`))
	f.Add([]byte(`{"URL":"http://example.com/p","Depth":2,"Priority":-7}`))
	f.Add([]byte(`{"URL":"http://example.com/p","Priority":2147483648}`))
	f.Add([]byte(`{"URL":"http://example.com/p","Priority":1.5}`))
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
		// Entries carry no ID and keep keys sorted: the bytes are stable too.
		if !bytes.Equal(once, twice) {
			t.Errorf("entry not stable for %q:\n once  %s\n twice %s", data, once, twice)
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
