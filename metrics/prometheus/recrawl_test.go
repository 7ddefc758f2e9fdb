package prometheus

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
)

// TestRecrawlMetrics: the pages of a recrawl are exposed by Change.
func TestRecrawlMetrics(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "<p>page</p>")
	}))
	defer site.Close()
	c := magpie.NewCollector(magpie.Recrawl(magpie.RecrawlPolicy{}))
	if err := c.Visit(site.URL + "/"); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	srv := httptest.NewServer(Handler(c))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		"magpie_recrawl_pages_total{change=\"new\"} 1\n",
		"magpie_recrawl_pages_total{change=\"unchanged\"} 0\n",
		"magpie_recrawl_pages_total{change=\"gone\"} 0\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}
