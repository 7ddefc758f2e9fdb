package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// --insecure reaches the browser too: a site with a certificate no one
// signed is crawled with --render --insecure as without --render, and
// --render alone refuses it as the plain crawl does.
func TestCLIRenderInsecure(t *testing.T) {
	requireChromium(t)
	site := httptest.NewTLSServer(scriptSite())
	t.Cleanup(site.Close)
	for _, tc := range []struct {
		name  string
		flags []string
		ok    bool
		want  []string
	}{
		{"render insecure", []string{"--render", "--insecure"}, true, []string{"/", "/from-script"}},
		{"render", []string{"--render"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := cliCommand(t, "", append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q"}, tc.flags...)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			r := exitResult(t, cmd.Run(), &stdout, &stderr)
			if !tc.ok {
				if r.code == 0 {
					t.Fatalf("exit 0 with an unverifiable certificate and no --insecure; stdout:\n%s", r.stdout)
				}
				if got := crawledPaths(t, r.stdout, site.URL); len(got) != 0 {
					t.Errorf("crawled %q without --insecure, want nothing", got)
				}
				// Named as the plain crawl names it: a TLS failure, with the flag that lifts it.
				if !regexp.MustCompile(`(?m)^\s+tls\s+1$`).MatchString(r.stderr) || !strings.Contains(r.stderr, "pass --insecure") {
					t.Errorf("stderr does not count a tls failure and suggest --insecure:\n%s", r.stderr)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if got := crawledPaths(t, r.stdout, site.URL); !slices.Equal(got, tc.want) {
				t.Errorf("crawled %q, want %q", got, tc.want)
			}
		})
	}
}
