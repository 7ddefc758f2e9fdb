package magpie

import (
	"fmt"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// TestQueueThreadsRule: in a queue run the threads are the crawl's download
// concurrency and a LimitRule's Parallelism caps each host within them, as
// Collector.Limit and queue.New say: one host gets min(Parallelism,
// threads) requests in flight, and all the threads when no rule limits it
// (neither Workers nor DefaultHostParallelism applies to a queue run).
func TestQueueThreadsRule(t *testing.T) {
	tests := []struct {
		name    string
		threads int
		opts    []CollectorOption
		rule    *LimitRule
		want    int
	}{
		{"no rule: all the threads", 20, nil, nil, 20},
		{"no rule, Workers(2): the threads", 6, []CollectorOption{Workers(2)}, nil, 6},
		{"Parallelism 3 under 8 threads", 8, nil, &LimitRule{DomainGlob: "*", Parallelism: 3}, 3},
		{"Parallelism 64 over 4 threads", 4, nil, &LimitRule{DomainGlob: "*", Parallelism: 64}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newInflightServer(t, tt.want)
			c := NewCollector(append([]CollectorOption{IgnoreRobotsTxt()}, tt.opts...)...)
			if tt.rule != nil {
				if err := c.Limit(tt.rule); err != nil {
					t.Fatalf("Limit() error = %v", err)
				}
			}
			q := storage.NewMemoryQueue(0)
			for i := range 3 * tt.want {
				pushURL(t, q, fmt.Sprintf("%s/p%d", s.URL, i))
			}
			done := make(chan error, 1)
			go func() { done <- c.RunQueue(t.Context(), q, tt.threads) }()
			select {
			case <-s.full:
			case <-time.After(20 * time.Second):
				t.Errorf("requests in flight reached %d, want %d", s.most.Load(), tt.want)
			}
			close(s.release)
			if err := <-done; err != nil {
				t.Fatalf("RunQueue() error = %v", err)
			}
			if got := s.most.Load(); got != int64(tt.want) {
				t.Errorf("most requests in flight = %d, want %d", got, tt.want)
			}
		})
	}
}
