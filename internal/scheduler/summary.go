package scheduler

import (
	"encoding/json"
	"fmt"
	"strings"
)

// PoolSummary is a snapshot of one buffer pool.
type PoolSummary struct {
	BufferCap       int `json:"buffer_cap"`
	MaxBufferNumber int `json:"max_buffer_number"`
	BufferNumber    int `json:"buffer_number"`
	Total           int `json:"total"`
}

// RequestCounts count requests through the run. InFlight is accepted requests
// neither finished nor left over at a stop.
type RequestCounts struct {
	Accepted   uint64 `json:"accepted"`
	Downloaded uint64 `json:"downloaded"`
	Failed     uint64 `json:"failed"`
	Cancelled  uint64 `json:"cancelled"`
	Done       uint64 `json:"done"`
	InFlight   uint64 `json:"in_flight"`
}

// LeftCounts count what a stop found still queued or in hand; see Leftovers.
type LeftCounts struct {
	Requests  uint64 `json:"requests"`
	Responses uint64 `json:"responses"`
	Items     uint64 `json:"items"`
}

// Summary is a structured snapshot of a scheduler. It marshals to JSON and
// prints as text with String.
type Summary struct {
	Status            Status          `json:"status"`
	Args              DataArgs        `json:"args"`
	Modules           []ModuleSummary `json:"modules"`
	RequestPool       PoolSummary     `json:"request_pool"`
	ResponsePool      PoolSummary     `json:"response_pool"`
	ItemPool          PoolSummary     `json:"item_pool"`
	Requests          RequestCounts   `json:"requests"`
	ResponsesAnalyzed uint64          `json:"responses_analyzed"`
	ItemsAccepted     uint64          `json:"items_accepted"`
	ItemsDone         uint64          `json:"items_done"`
	Pending           int64           `json:"pending"`
	ErrorsSent        uint64          `json:"errors_sent"`
	ErrorsDropped     uint64          `json:"errors_dropped"`
	Panics            uint64          `json:"panics"`
	Left              LeftCounts      `json:"left"`
}

// Summary returns a snapshot of the current (or last stopped) run. Counters
// are read one by one while the run goes on, so they may disagree by the
// work that moved meanwhile.
func (s *Scheduler[Req, Resp, Item]) Summary() Summary {
	sum := Summary{Status: s.Status()}
	r := s.run.Load()
	if r == nil {
		return sum
	}
	sum.Args = r.da
	for _, m := range r.reg.sorted() {
		sum.Modules = append(sum.Modules, m.Summary())
	}
	sum.RequestPool = poolSummary(r.reqs)
	sum.ResponsePool = poolSummary(r.resps)
	sum.ItemPool = poolSummary(r.items)
	st := &r.stats
	rc := RequestCounts{
		Accepted:   st.requestsAccepted.Load(),
		Downloaded: st.requestsDownloaded.Load(),
		Failed:     st.requestsFailed.Load(),
		Cancelled:  st.requestsCancelled.Load(),
	}
	rc.Done = rc.Downloaded + rc.Failed + rc.Cancelled
	sum.Left = LeftCounts{Requests: st.leftRequests.Load(), Responses: st.leftResponses.Load(), Items: st.leftItems.Load()}
	if finished := rc.Done + sum.Left.Requests; rc.Accepted > finished {
		rc.InFlight = rc.Accepted - finished
	}
	sum.Requests = rc
	sum.ResponsesAnalyzed = st.responsesAnalyzed.Load()
	sum.ItemsAccepted = st.itemsAccepted.Load()
	sum.ItemsDone = st.itemsDone.Load()
	sum.Pending = r.pending.load()
	sum.ErrorsSent = st.errorsSent.Load()
	sum.ErrorsDropped = st.errorsDropped.Load()
	sum.Panics = st.panics.Load()
	return sum
}

type poolStats interface {
	BufferCap() int
	MaxBufferNumber() int
	BufferNumber() int
	Total() int
}

func poolSummary(p poolStats) PoolSummary {
	return PoolSummary{BufferCap: p.BufferCap(), MaxBufferNumber: p.MaxBufferNumber(), BufferNumber: p.BufferNumber(), Total: p.Total()}
}

// String prints the summary as indented text, one fact per line.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s\n", s.Status)
	a := s.Args
	fmt.Fprintf(&b, "workers: download=%d analyze=%d pipeline=%d, error buffer %d\n",
		a.DownloadWorkers, a.AnalyzeWorkers, a.PipelineWorkers, a.ErrorBuffer)
	for _, p := range []struct {
		name string
		p    PoolSummary
	}{{"request", s.RequestPool}, {"response", s.ResponsePool}, {"item", s.ItemPool}} {
		fmt.Fprintf(&b, "%s pool: %d/%d buffers of %d, %d items\n", p.name, p.p.BufferNumber, p.p.MaxBufferNumber, p.p.BufferCap, p.p.Total)
	}
	rc := s.Requests
	fmt.Fprintf(&b, "requests: accepted=%d downloaded=%d failed=%d cancelled=%d in_flight=%d\n",
		rc.Accepted, rc.Downloaded, rc.Failed, rc.Cancelled, rc.InFlight)
	fmt.Fprintf(&b, "responses analyzed: %d; items: accepted=%d done=%d; pending: %d\n",
		s.ResponsesAnalyzed, s.ItemsAccepted, s.ItemsDone, s.Pending)
	fmt.Fprintf(&b, "errors: sent=%d dropped=%d panics=%d\n", s.ErrorsSent, s.ErrorsDropped, s.Panics)
	fmt.Fprintf(&b, "left at stop: requests=%d responses=%d items=%d\n", s.Left.Requests, s.Left.Responses, s.Left.Items)
	for _, m := range s.Modules {
		c := m.Counts
		fmt.Fprintf(&b, "module %s: score=%d called=%d accepted=%d completed=%d handling=%d\n",
			m.ID, m.Score, c.Called, c.Accepted, c.Completed, c.Handling)
	}
	return b.String()
}

// JSON returns the summary as indented JSON.
func (s Summary) JSON() ([]byte, error) { return json.MarshalIndent(s, "", "  ") }
