package storage

import (
	"net/url"
	"testing"
	"time"
)

func TestMergeAndSelectCookies(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	stored := MergeCookies("", "a=1; Path=/\nb=2; Path=/docs\ns=3; Secure\nold=x; Max-Age=60", now)
	// A later response replaces a by name, deletes old, and adds c.
	stored = MergeCookies(stored, "a=9\nold=; Max-Age=-1\nc=4; Expires=Sun, 22 Nov 2026 11:00:00 GMT\nnot a cookie", now)
	tests := []struct {
		url  string
		at   time.Time
		want string
	}{
		{"http://h/", now, "a=9"},
		{"http://h/docs/x", now, "a=9\nb=2; Path=/docs"},
		{"http://h/docsx", now, "a=9"},
		{"https://h/", now, "a=9\ns=3; Secure"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := SelectCookies(stored, u, tt.at); got != tt.want {
			t.Errorf("SelectCookies(%s) = %q, want %q (stored %q)", tt.url, got, tt.want, stored)
		}
	}
	// Max-Age became an absolute time when stored: after it, the cookie is gone.
	withAge := MergeCookies("", "m=1; Max-Age=60", now)
	u, _ := url.Parse("http://h/")
	if got := SelectCookies(withAge, u, now.Add(30*time.Second)); got != "m=1; Expires=Sun, 22 Nov 2026 12:01:00 GMT" {
		t.Errorf("SelectCookies 30 s in = %q, want m=1 expiring at 12:01:00", got)
	}
	if got := SelectCookies(withAge, u, now.Add(61*time.Second)); got != "" {
		t.Errorf("SelectCookies 61 s in = %q, want none", got)
	}
	if h := CookieHost(&url.URL{Host: "Example.COM:8080"}); h != "example.com" {
		t.Errorf("CookieHost = %q, want example.com", h)
	}
}
