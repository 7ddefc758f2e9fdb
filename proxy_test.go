package magpie

import (
	"context"
	"strings"
	"testing"
)

func TestProxyURLFromContext(t *testing.T) {
	box := new(string)
	ctx := context.WithValue(t.Context(), ProxyURLKey, box)
	if got := proxyURLFromContext(ctx); got != "" {
		t.Errorf("proxyURLFromContext(empty box) = %q, want \"\"", got)
	}
	*box = "http://proxy:3128"
	if got := proxyURLFromContext(ctx); got != "http://proxy:3128" {
		t.Errorf("proxyURLFromContext(box) = %q, want %q", got, "http://proxy:3128")
	}
	// Colly's switcher stores a plain string.
	colly := context.WithValue(t.Context(), ProxyURLKey, "socks5://p:1080")
	if got := proxyURLFromContext(colly); got != "socks5://p:1080" {
		t.Errorf("proxyURLFromContext(string) = %q, want %q", got, "socks5://p:1080")
	}
	if got := proxyURLFromContext(t.Context()); got != "" {
		t.Errorf("proxyURLFromContext(no value) = %q, want \"\"", got)
	}
	var nilBox *string
	if got := proxyURLFromContext(context.WithValue(t.Context(), ProxyURLKey, nilBox)); got != "" {
		t.Errorf("proxyURLFromContext(nil box) = %q, want \"\"", got)
	}
	// A password in the reported URL is redacted, whoever reported it.
	for _, v := range []any{"http://u:secret@proxy:3128", &[]string{"socks5://u:secret@p:1080"}[0]} {
		got := proxyURLFromContext(context.WithValue(t.Context(), ProxyURLKey, v))
		if strings.Contains(got, "secret") || !strings.Contains(got, "u:xxxxx@") {
			t.Errorf("proxyURLFromContext(%v) = %q, want the password redacted", v, got)
		}
	}
}
