package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// collyQueueStorage is Colly's queue.Storage interface, as a Colly program
// would declare a variable of it.
type collyQueueStorage interface {
	Init() error
	AddRequest([]byte) error
	GetRequest() ([]byte, error)
	QueueSize() (int, error)
}

func TestInMemoryQueueStorageCollyAPI(t *testing.T) {
	var s collyQueueStorage = &queue.InMemoryQueueStorage{MaxSize: 2}
	if err := s.Init(); err != nil {
		t.Fatalf("Init() error = %v", err)
	}
	for _, r := range []string{"first", "second"} {
		if err := s.AddRequest([]byte(r)); err != nil {
			t.Fatalf("AddRequest(%q) error = %v", r, err)
		}
	}
	if err := s.AddRequest([]byte("third")); !errors.Is(err, queue.ErrQueueFull) {
		t.Errorf("AddRequest beyond MaxSize error = %v, want ErrQueueFull", err)
	}
	if n, err := s.QueueSize(); n != 2 || err != nil {
		t.Errorf("QueueSize() = %d, %v; want 2, nil", n, err)
	}
	for _, want := range []string{"first", "second"} {
		got, err := s.GetRequest()
		if err != nil || string(got) != want {
			t.Errorf("GetRequest() = %q, %v; want %q, nil", got, err, want)
		}
	}
	if got, err := s.GetRequest(); !errors.Is(err, queue.ErrEmpty) || got != nil {
		t.Errorf("GetRequest() on empty = %q, %v; want nil, ErrEmpty", got, err)
	}
	if n, err := s.QueueSize(); n != 0 || err != nil {
		t.Errorf("QueueSize() after draining = %d, %v; want 0, nil", n, err)
	}
}

// TestNewTakesCollyStorage passes a Colly queue storage (Init, AddRequest,
// GetRequest, QueueSize, as gocolly/redisstorage has) to New as it is, the
// way a Colly program does, and crawls through it.
func TestNewTakesCollyStorage(t *testing.T) {
	s := newTestServer(t, func(n int) []int {
		if n < 10 {
			return []int{n + 10}
		}
		return nil
	})
	c := magpie.NewCollector()
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
	var src collyQueueStorage = &collyList{}
	q, err := queue.New(2, src)
	if err != nil {
		t.Fatalf("New(2, Colly storage) error = %v, want nil", err)
	}
	for i := range 10 {
		mustAddURL(t, q, s.page(i))
	}
	if n, _ := src.QueueSize(); n != 10 {
		t.Fatalf("Colly storage size after 10 AddURL = %d, want 10", n)
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	if f := s.fetches(); len(f) != 20 {
		t.Errorf("fetched %d distinct pages through a Colly storage given to New, want 20", len(f))
	}
	if n, _ := src.QueueSize(); n != 0 {
		t.Errorf("Colly storage size after Run = %d, want 0", n)
	}
}

func TestNewStorageKinds(t *testing.T) {
	bad := errors.New("init failed")
	tests := []struct {
		name    string
		s       queue.Storage
		wantErr error
	}{
		{"leased store", &queue.InMemoryQueueStorage{}, nil},
		{"Colly storage", &collyList{}, nil},
		{"Colly storage whose Init fails", &failInit{err: bad}, bad},
		{"neither", struct{ Name string }{"x"}, queue.ErrUnsupportedStorage},
		{"Colly storage without Init", struct{ noInit }{}, queue.ErrUnsupportedStorage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := queue.New(1, tt.s)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(1, %T) error = %v, want %v", tt.s, err, tt.wantErr)
			}
			if err == nil && q.Storage() == nil {
				t.Errorf("New(1, %T).Storage() = nil", tt.s)
			}
		})
	}
}

// noInit has Colly's queue methods but not Init.
type noInit struct{}

func (noInit) AddRequest([]byte) error     { return nil }
func (noInit) GetRequest() ([]byte, error) { return nil, nil }
func (noInit) QueueSize() (int, error)     { return 0, nil }

// TestOneThreadCallbacksTakeTurns: a one-thread queue run of a sync
// collector runs its callbacks one at a time, as Colly's single consumer
// thread does, so plain appends do not race (run with -race).
func TestOneThreadCallbacksTakeTurns(t *testing.T) {
	s := newTestServer(t, func(n int) []int {
		if n < 15 {
			return []int{2*n + 1, 2*n + 2}
		}
		return nil
	})
	c := magpie.NewCollector()
	var seen []string
	c.OnResponse(func(r *magpie.Response) { seen = append(seen, r.Request.URL.Path) })
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		seen = append(seen, "link")
		_ = e.Request.Visit(href(e))
	})
	q, err := queue.New(1, &collyList{})
	if err != nil {
		t.Fatal(err)
	}
	mustAddURL(t, q, s.page(0))
	if err := runWithin(t, q, c, time.Minute); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if got := len(s.fetches()); got != 31 {
		t.Errorf("fetched %d pages, want 31", got)
	}
	if len(seen) != 31+30 {
		t.Errorf("callbacks recorded %d events, want %d", len(seen), 31+30)
	}
}
