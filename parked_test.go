package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestMaxParkedBoundsTheGate: with one host busy (Parallelism 1, its only
// request held by the server), requests waiting for that host fill the gate
// up to MaxParked and no further; the rest wait in the frontier, and all are
// fetched once the host frees up.
func TestMaxParkedBoundsTheGate(t *testing.T) {
	const urls, parked = 40, 3
	arrived := make(chan struct{}, urls)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	c := NewCollector(Async(), IgnoreRobotsTxt(), Workers(4), MaxParked(parked))
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range urls {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", srv.URL, i)); err != nil {
			t.Fatalf("Visit(%d) error = %v, want nil", i, err)
		}
	}
	<-arrived // the host's one slot is taken and held

	// The feeder fills the gate while the host is busy; watch it until it is
	// full, checking the bound on every look.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := c.Stats()
		if st.Parked > parked {
			t.Fatalf("Stats().Parked = %d, want at most MaxParked %d", st.Parked, parked)
		}
		if st.Pending != urls {
			t.Fatalf("Stats().Pending = %d, want %d (admitted, not finished)", st.Pending, urls)
		}
		if st.Parked == parked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate never filled: Stats() = %+v", st)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline, not ordering events
	}
	close(release)
	c.Wait()
	if got := c.Stats(); got.Responses != urls || got.Pending != 0 || got.Parked != 0 {
		t.Errorf("after Wait, Stats() = %+v, want %d responses, nothing pending or parked", got, urls)
	}
}
