package warc_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// TestRequestsOtherThanGETAreKeyedAsWarcioKeysThem archives POSTs of a
// form, of JSON, of multipart fields, of text and of bytes, and a HEAD:
// each is indexed under its URL with the method and the body's parameters
// in the query ("…/form?__wb_method=post&a=1&b=two"), as warcio's
// cdx-index keys it, and the Writer's index equals warcio's.
func TestRequestsOtherThanGETAreKeyedAsWarcioKeysThem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %q", r.Method, r.URL, b) // a body of its own: no revisits
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt(), magpie.AllowURLRevisit())
	post := func(path, ct, body string) {
		t.Helper()
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if err := c.Request(http.MethodPost, srv.URL+path, strings.NewReader(body), nil, h); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
	}
	if err := c.Post(srv.URL+"/form", map[string]string{"a": "1", "b": "two"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(srv.URL + "/form"); err != nil {
		t.Fatal(err)
	}
	post("/search?lang=EN", "application/x-www-form-urlencoded; charset=UTF-8", "q=caf%C3%A9+cr%C3%A8me&page=2&sort=%2Bdate")
	post("/api", "application/json", `{"user":{"name":"Ann Lee","tags":["x","y"]},"n":1.5,"big":1e21,"ok":true,"none":null,"empty":"","2":"two","1":"one"}`)
	post("/note", "text/plain", "just words, not JSON")
	post("/blob", "application/octet-stream", "\x00\x01binary\xff")
	if err := c.PostMultipart(srv.URL+"/upload", map[string][]byte{"title": []byte("Hello world"), "n": []byte("3")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Head(srv.URL + "/form"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v, want 1", files)
	}
	data, err := os.ReadFile(strings.TrimSuffix(files[0], ".warc.gz") + ".cdxj")
	if err != nil {
		t.Fatal(err)
	}
	ours := cdxKeys(t, string(data))
	keys := make([]string, len(ours))
	for i, k := range ours {
		keys[i], _, _ = strings.Cut(k, " ")
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ip, port, _ := strings.Cut(host, ":")
	parts := strings.Split(ip, ".")
	slices.Reverse(parts)
	prefix := strings.Join(parts, ",") + ":" + port + ")"
	for _, want := range []string{
		prefix + "/form?__wb_method=post&a=1&b=two",
		prefix + "/form",
		prefix + "/form?__wb_method=head&__wb_post_data=",
	} {
		if !slices.Contains(keys, want) {
			t.Errorf("no index key %q in\n%s", want, strings.Join(keys, "\n"))
		}
	}
	if !strings.Contains(string(data), `"method":"POST","requestBody":"a=1&b=two"`) {
		t.Errorf("the form POST's line does not end with its method and body:\n%s", data)
	}

	tools := warcTools(t)
	cli := filepath.Join(tools, "node_modules", "warcio", "dist", "cli.js")
	theirs := cdxKeys(t, string(node(t, tools, cli, "cdx-index", files[0])))
	if strings.Join(theirs, "\n") != strings.Join(ours, "\n") {
		t.Errorf("warcio indexes\n%s\nthe Writer's index has\n%s", strings.Join(theirs, "\n"), strings.Join(ours, "\n"))
	}
}
