package warc_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

var _ magpie.FetchArchiver = (*warc.Writer)(nil)

// domFetcher stands for render's browser: it "renders" /rendered pages.
type domFetcher struct{}

const renderedDOM = "<html><head><title>Rendered</title></head><body>built by scripts</body></html>"

func (domFetcher) Selects(r *magpie.Request) bool { return strings.HasPrefix(r.URL.Path, "/rendered") }

func (domFetcher) Fetch(_ context.Context, fr *magpie.FetchRequest) (*magpie.FetchResult, error) {
	return &magpie.FetchResult{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: []byte(renderedDOM)}, nil
}

// TestFetchedPageIsAResourceRecord checks that a page a Fetcher downloaded
// is archived as a resource record of its DOM under urn:magpie:dom:, apart
// from the HTTP captures, and that it is not indexed for replay.
func TestFetchedPageIsAResourceRecord(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.WithFetcher(domFetcher{}))
	if err := c.Visit(s.URL + "/rendered"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, dir)
	res := byURI(recs, "resource", "/rendered")
	if len(res) != 1 || res[0].uri != "urn:magpie:dom:"+s.URL+"/rendered" || string(res[0].block) != renderedDOM {
		t.Fatalf("resource records %+v", res)
	}
	if n := len(byURI(recs, "response", "/rendered")); n != 0 {
		t.Errorf("%d response records for the fetched page", n)
	}
	if got := w.Counts(); got.Resource != 1 || got.Response != 1 { // robots.txt went over HTTP
		t.Errorf("Counts() = %+v", got)
	}
}
