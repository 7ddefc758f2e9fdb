package main

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// addrStats records page request starts by the address a connection came
// to (-addr-gap): every host served on one address together, as that
// server sees them. Politeness by address (magpie's PolitenessBy IP) must
// keep the starts at one address a Delay apart however many host names or
// ports the crawler sees there. Safe for concurrent use.
type addrStats struct {
	gap time.Duration // gaps shorter than this are counted
	// mu guards m, and orders the starts: each start's time is read under
	// it, so that two requests arriving together cannot be recorded in
	// the reverse order of their times (a negative gap).
	mu sync.Mutex
	m  map[string]*addrStat
}

// addrStat is one address's starts.
type addrStat struct {
	starts int
	last   time.Time
	minGap time.Duration // meaningful once starts >= 2
	below  int           // gaps shorter than addrStats.gap
}

// start records a page request start at addr now.
func (a *addrStats) start(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	st := a.m[addr]
	if st == nil {
		st = &addrStat{}
		a.m[addr] = st
	}
	if st.starts > 0 {
		g := now.Sub(st.last)
		if st.starts == 1 || g < st.minGap {
			st.minGap = g
		}
		if g < a.gap {
			st.below++
		}
	}
	st.starts++
	st.last = now
}

func (a *addrStats) reset() {
	a.mu.Lock()
	a.m = map[string]*addrStat{}
	a.mu.Unlock()
}

// AddrReport is the JSON form of one address's starts.
type AddrReport struct {
	Addr       string  `json:"addr"`
	PageStarts int     `json:"page_starts"`
	MinGapMS   float64 `json:"min_gap_ms"` // -1 when fewer than two page starts
	// GapsBelow counts the gaps between two consecutive page starts at
	// the address shorter than BelowMS (-addr-gap).
	GapsBelow int     `json:"gaps_below"`
	BelowMS   float64 `json:"below_ms"`
}

// report returns the addresses' figures, by address.
func (a *addrStats) report() []AddrReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AddrReport, 0, len(a.m))
	for addr, st := range a.m {
		r := AddrReport{Addr: addr, PageStarts: st.starts, MinGapMS: -1, GapsBelow: st.below, BelowMS: ms(a.gap)}
		if st.starts >= 2 {
			r.MinGapMS = ms(st.minGap)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y AddrReport) int {
		switch {
		case x.Addr < y.Addr:
			return -1
		case x.Addr > y.Addr:
			return 1
		}
		return 0
	})
	return out
}

// localAddr is the IP address r's connection came to, without its port.
func localAddr(r *http.Request) string {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if a == nil {
		return "unknown"
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return a.String()
}
