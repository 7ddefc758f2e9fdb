package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
)

// Snapshot is what /api/events sends each second: the figures of the page.
type Snapshot struct {
	Time  time.Time    `json:"time"`
	Stats magpie.Stats `json:"stats"`
	// Point is the latest second of the charts.
	Point Point `json:"point"`
	// InFlight is the requests being fetched; Queued those admitted and
	// waiting (Stats.Pending less InFlight).
	InFlight int `json:"in_flight"`
	Queued   int `json:"queued"`
	// Memory is what the Go runtime holds from the OS, in bytes.
	Memory   uint64              `json:"memory"`
	Hosts    []magpie.HostReport `json:"hosts"`
	Failures []magpie.Failure    `json:"failures"`
	Frontier Frontier            `json:"frontier"`
}

// Frontier is the frontier's head; Error says why it is missing or cut
// short ("not available for this storage", "no crawl running").
type Frontier struct {
	Entries []magpie.HeadEntry `json:"entries"`
	Error   string             `json:"error,omitempty"`
}

// Bounds of a snapshot's lists.
const (
	snapshotHosts    = 50
	snapshotFailures = 20
	snapshotHead     = 20
)

// snapshot gathers the page's figures.
func (h *Handler) snapshot(ctx context.Context) Snapshot {
	s := Snapshot{Time: time.Now(), Stats: h.c.Stats(), Hosts: h.c.HostReports(0)}
	s.Point, s.Memory = h.samples.latest()
	for _, hr := range s.Hosts {
		s.InFlight += hr.InFlight
	}
	s.Queued = max(s.Stats.Pending-s.InFlight, 0)
	s.Hosts = s.Hosts[:min(len(s.Hosts), snapshotHosts)]
	f := h.c.RecentFailures()
	s.Failures = f[:min(len(f), snapshotFailures)]
	s.Frontier = h.frontier(ctx, snapshotHead)
	return s
}

func (h *Handler) frontier(ctx context.Context, n int) Frontier {
	e, err := h.c.FrontierHead(ctx, n)
	f := Frontier{Entries: e}
	if f.Entries == nil {
		f.Entries = []magpie.HeadEntry{}
	}
	switch {
	case errors.Is(err, storage.ErrUnsupported):
		f.Error = "not available for this storage"
	case err != nil:
		f.Error = err.Error()
	}
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// count reads the query's n, def when absent; bad is a 400.
func count(r *http.Request, def int) (int, bool) {
	s := r.URL.Query().Get("n")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && n <= 10_000
}

func (h *Handler) getStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.c.Stats())
}

func (h *Handler) getSeries(w http.ResponseWriter, r *http.Request) {
	n, ok := count(r, historyLen)
	if !ok {
		writeError(w, http.StatusBadRequest, "n must be a number from 0 to 10000")
		return
	}
	writeJSON(w, http.StatusOK, h.samples.points(n))
}

func (h *Handler) getHosts(w http.ResponseWriter, r *http.Request) {
	n, ok := count(r, 100)
	if !ok {
		writeError(w, http.StatusBadRequest, "n must be a number from 0 to 10000")
		return
	}
	writeJSON(w, http.StatusOK, h.c.HostReports(n))
}

func (h *Handler) getFailures(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.c.RecentFailures())
}

func (h *Handler) getFrontier(w http.ResponseWriter, r *http.Request) {
	n, ok := count(r, snapshotHead)
	if !ok {
		writeError(w, http.StatusBadRequest, "n must be a number from 0 to 10000")
		return
	}
	writeJSON(w, http.StatusOK, h.frontier(r.Context(), n))
}

// events streams a Snapshot a second until the client goes, or Close.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	t := time.NewTicker(h.samples.tick)
	defer t.Stop()
	for {
		b, err := json.Marshal(h.snapshot(r.Context()))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-h.closed:
			return
		}
	}
}

func (h *Handler) pause(w http.ResponseWriter, _ *http.Request) {
	h.c.Pause()
	writeJSON(w, http.StatusOK, map[string]bool{"paused": true})
}

func (h *Handler) resume(w http.ResponseWriter, _ *http.Request) {
	h.c.Resume()
	writeJSON(w, http.StatusOK, map[string]bool{"paused": false})
}

func (h *Handler) stop(w http.ResponseWriter, _ *http.Request) {
	if err := h.onStop(); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"stopped": true})
}

// block blocks the form's host, one the crawl has met: a host it has not
// is answered with the reason, as a typo would otherwise block nothing
// useful while seeming to work.
func (h *Handler) block(w http.ResponseWriter, r *http.Request) {
	host := r.FormValue("host")
	if host == "" {
		writeError(w, http.StatusBadRequest, "host= is required")
		return
	}
	known := false
	for _, hr := range h.c.HostReports(0) {
		if hr.Host == host || hostName(hr.Host) == host {
			known = true
			break
		}
	}
	if !known {
		writeError(w, http.StatusNotFound, fmt.Sprintf("host %q is not in the crawl", host))
		return
	}
	if err := h.c.BlockHost(host); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"blocked": host})
}

// hostName is hostport without its port.
func hostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// add adds the form's url to the running crawl as a seed.
func (h *Handler) add(w http.ResponseWriter, r *http.Request) {
	u := r.FormValue("url")
	if u == "" {
		writeError(w, http.StatusBadRequest, "url= is required")
		return
	}
	switch err := h.c.AddSeed(u); {
	case errors.Is(err, magpie.ErrNoCrawl):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeJSON(w, http.StatusAccepted, map[string]string{"added": u})
	}
}
