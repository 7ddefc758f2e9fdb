package magpie

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileNameNoHiddenFiles: Response.FileName, from the URL or from
// Content-Disposition, never starts with a dot or a space (a saved page must
// not become .bashrc, .htaccess or .git) and never leaves the directory it is
// joined to.
func TestFileNameNoHiddenFiles(t *testing.T) {
	tests := []struct {
		url, disposition, want string
	}{
		{url: "http://h.test/.bashrc", want: "_bashrc"},
		{url: "http://h.test/.htaccess", want: "_htaccess"},
		{url: "http://h.test/.git", want: "_git"},
		{url: "http://h.test/..", want: "_"},
		{url: "http://h.test/%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
		{url: "http://h.test/a", disposition: `attachment; filename=".htaccess"`, want: "_htaccess"},
		{url: "http://h.test/a", disposition: `attachment; filename="../../.bashrc"`, want: "_bashrc"},
		{url: "http://h.test/a", disposition: `attachment; filename=" .profile"`},
		{url: "http://h.test/a", disposition: `attachment; filename="..."`},
		{url: "http://h.test/a", disposition: `attachment; filename="report.pdf."`, want: "report.pdf"},
		{url: "http://h.test/a", disposition: `attachment; filename="..\\..\\x.bat"`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if tc.disposition != "" {
			h.Set("Content-Disposition", tc.disposition)
		}
		r := &Response{Request: &Request{URL: u}, Headers: &h}
		name := r.FileName()
		if tc.want != "" && name != tc.want {
			t.Errorf("FileName(%s, %s) = %q, want %q", tc.url, tc.disposition, name, tc.want)
		}
		if name == "" || strings.IndexAny(name, ". ") == 0 || strings.HasSuffix(name, ".") || strings.ContainsAny(name, `/\`) {
			t.Errorf("FileName(%s, %s) = %q: empty, hidden, dot-ended or with a separator", tc.url, tc.disposition, name)
		}
		if p := filepath.Join(dir, name); filepath.Dir(p) != dir {
			t.Errorf("FileName(%s, %s) = %q leaves the directory: %s", tc.url, tc.disposition, name, p)
		}
	}
}
