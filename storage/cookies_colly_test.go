package storage

import (
	"net/http"
	"testing"
	"time"
)

func TestStringifyCookiesRoundTrip(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []*http.Cookie{
		{Name: "session", Value: "abc", Path: "/", HttpOnly: true},
		{Name: "pref", Value: "dark mode", Domain: "example.com", Expires: exp, Secure: true},
	}
	s := StringifyCookies(in)
	out := UnstringifyCookies(s + "\nnot a cookie line\n")
	if len(out) != 2 {
		t.Fatalf("UnstringifyCookies(%q) = %d cookies, want 2", s, len(out))
	}
	for i, c := range out {
		if c.Name != in[i].Name || c.Value != in[i].Value || c.Path != in[i].Path || c.Secure != in[i].Secure ||
			c.HttpOnly != in[i].HttpOnly || !c.Expires.Equal(in[i].Expires) {
			t.Errorf("cookie %d = %+v, want %+v", i, c, in[i])
		}
	}
	if !ContainsCookie(out, "pref") || ContainsCookie(out, "missing") {
		t.Error("ContainsCookie does not find pref, or finds a cookie that is not there")
	}
	if StringifyCookies(nil) != "" || len(UnstringifyCookies("")) != 0 {
		t.Error("empty input does not give empty output")
	}
}
