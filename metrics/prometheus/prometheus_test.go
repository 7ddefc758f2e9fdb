package prometheus_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/magpiecrawl/magpie"
	mprom "github.com/magpiecrawl/magpie/metrics/prometheus"
)

func TestHandlerMatchesStats(t *testing.T) {
	var busy atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<a href="/a">a</a><a href="/b">b</a><a href="/missing">x</a><a href="mailto:x@y">m</a>`)
		case "/b":
			if busy.Add(1) == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, `<p class=item>one</p><p class=item>two</p><a href="/">home</a>`)
		case "/a":
			fmt.Fprint(w, `<p class=item>one</p><p class=item>two</p><a href="/">home</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(), magpie.StreamHTML())
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnHTML("p.item", func(e *magpie.HTMLElement) { e.Emit(e.Text) })
	c.Pipeline(func(_ context.Context, it *magpie.Item) error { return nil })
	if err := c.Visit(site.URL + "/"); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	srv := httptest.NewServer(mprom.Handler(c))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	text := string(body)
	for _, want := range []string{
		fmt.Sprintf("magpie_requests_total %d\n", st.Requests),
		fmt.Sprintf("magpie_responses_total{code=\"200\"} %d\n", st.StatusCodes[200]),
		fmt.Sprintf("magpie_responses_total{code=\"404\"} %d\n", st.StatusCodes[404]),
		fmt.Sprintf("magpie_items_total{outcome=\"scraped\"} %d\n", st.ItemsScraped),
		fmt.Sprintf("magpie_refused_total{reason=\"visited\"} %d\n", st.Refused[magpie.RefusedVisited]),
		fmt.Sprintf("magpie_refused_total{reason=\"scheme\"} %d\n", st.Refused[magpie.RefusedScheme]),
		fmt.Sprintf("magpie_busy_retries_total %d\n", st.BusyRetries),
		fmt.Sprintf("magpie_html_pages_total{how=\"streamed\"} %d\n", st.HTMLStreamed),
		"magpie_html_pages_total{how=\"parsed_whole\"} 0\n",
		"magpie_pending 0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if st.StatusCodes[200] != 3 || st.StatusCodes[404] != 1 || st.StatusCodes[429] != 1 || st.BusyRetries != 1 || st.ItemsScraped != 4 || st.HTMLStreamed != 3 {
		t.Errorf("Stats = %+v, want 3 200s, 1 404, 1 429 retried once, 4 items, 3 pages streamed", st)
	}
}

// TestRootDoesNotImportPrometheus keeps the root package lean.
func TestRootDoesNotImportPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/magpiecrawl/magpie").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "prometheus") {
		t.Error("the root package depends on a Prometheus package")
	}
}
