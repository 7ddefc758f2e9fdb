// Package prometheus exposes a magpie Collector's Stats as Prometheus
// metrics. It is a sub-package so that the root package does not depend on
// the Prometheus client.
//
// Metrics (all prefixed magpie_): requests_total, responses_total{code},
// response_bytes_total, items_total{outcome}, refused_total{reason},
// retries_total, busy_retries_total, robots_fetches_total, html_pages_total{how} (StreamHTML's
// "streamed" and "parsed_whole"), pending, parked, and inflight{host}
// and waiting{host} for at most the 50 busiest hosts, so that a crawl of
// many hosts cannot blow up the label space.
package prometheus

import (
	"net/http"
	"strconv"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/magpiecrawl/magpie"
)

// Collector is a prometheus.Collector reading a magpie Collector's Stats at
// every scrape. Safe for concurrent use.
type Collector struct {
	c *magpie.Collector

	requests, responses, bytes, items, refused, retries, busy, robots, html *prom.Desc
	pending, parked, inflight, waiting, recrawl                             *prom.Desc
}

// New returns a Prometheus collector for c; register it with a registry.
func New(c *magpie.Collector) *Collector {
	d := func(name, help string, labels ...string) *prom.Desc {
		return prom.NewDesc("magpie_"+name, help, labels, nil)
	}
	return &Collector{
		c:         c,
		requests:  d("requests_total", "Requests sent (each try)."),
		responses: d("responses_total", "Responses received, by HTTP status code.", "code"),
		bytes:     d("response_bytes_total", "Decoded response body bytes received."),
		items:     d("items_total", "Items through the pipelines, by outcome (scraped, dropped, failed).", "outcome"),
		refused:   d("refused_total", "Requests refused before they were sent, by reason.", "reason"),
		retries:   d("retries_total", "Requests sent again by the retry policy."),
		busy:      d("busy_retries_total", "Requests sent again after a 429, or a 503 with Retry-After (BusyRetries)."),
		robots:    d("robots_fetches_total", "robots.txt fetches."),
		recrawl:   d("recrawl_pages_total", "Pages fetched in recrawl mode, by what was found (new, changed, unchanged, gone).", "change"),
		html:      d("html_pages_total", "HTML pages under StreamHTML, by how their OnHTML selectors were matched (streamed, parsed_whole).", "how"),
		pending:   d("pending", "Requests admitted and not finished."),
		parked:    d("parked", "Requests waiting in the politeness gate."),
		inflight:  d("inflight", "Requests in flight, for the busiest hosts.", "host"),
		waiting:   d("waiting", "Requests waiting for their host's turn, for the busiest hosts.", "host"),
	}
}

// Describe sends the metrics' descriptions.
func (m *Collector) Describe(ch chan<- *prom.Desc) {
	for _, d := range []*prom.Desc{m.requests, m.responses, m.bytes, m.items, m.refused, m.retries, m.busy, m.robots,
		m.html, m.pending, m.parked, m.inflight, m.waiting, m.recrawl} {
		ch <- d
	}
}

// Collect sends the current values.
func (m *Collector) Collect(ch chan<- prom.Metric) {
	st := m.c.Stats()
	counter := func(d *prom.Desc, v float64, labels ...string) {
		ch <- prom.MustNewConstMetric(d, prom.CounterValue, v, labels...)
	}
	gauge := func(d *prom.Desc, v float64, labels ...string) {
		ch <- prom.MustNewConstMetric(d, prom.GaugeValue, v, labels...)
	}
	counter(m.requests, float64(st.Requests))
	for code, n := range st.StatusCodes {
		counter(m.responses, float64(n), strconv.Itoa(code))
	}
	counter(m.bytes, float64(st.Bytes))
	counter(m.items, float64(st.ItemsScraped), "scraped")
	counter(m.items, float64(st.ItemsDropped), "dropped")
	counter(m.items, float64(st.ItemsFailed), "failed")
	for reason, n := range st.Refused {
		counter(m.refused, float64(n), reason)
	}
	counter(m.retries, float64(st.Retries))
	counter(m.busy, float64(st.BusyRetries))
	counter(m.robots, float64(st.RobotsFetches))
	counter(m.recrawl, float64(st.Recrawl.New), "new")
	counter(m.recrawl, float64(st.Recrawl.Changed), "changed")
	counter(m.recrawl, float64(st.Recrawl.Unchanged), "unchanged")
	counter(m.recrawl, float64(st.Recrawl.Gone), "gone")
	counter(m.html, float64(st.HTMLStreamed), "streamed")
	counter(m.html, float64(st.HTMLParsedWhole), "parsed_whole")
	gauge(m.pending, float64(st.Pending))
	gauge(m.parked, float64(st.Parked))
	for _, h := range st.Hosts {
		gauge(m.inflight, float64(h.InFlight), h.Host)
		gauge(m.waiting, float64(h.Waiting), h.Host)
	}
}

// Handler serves c's metrics (and nothing else) in the Prometheus text
// format, from a registry of its own.
func Handler(c *magpie.Collector) http.Handler {
	reg := prom.NewRegistry()
	reg.MustRegister(New(c))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
