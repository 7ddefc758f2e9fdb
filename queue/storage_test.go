package queue_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

func TestInMemoryQueueStorageConformance(t *testing.T) {
	storagetest.RunQueue(t, func(*testing.T) storage.Queue { return &queue.InMemoryQueueStorage{} })
}

func TestInMemoryQueueStorageHostConformance(t *testing.T) {
	storagetest.RunHostQueue(t, func(*testing.T) storage.HostQueue { return &queue.InMemoryQueueStorage{} })
}

func TestFromCollyConformance(t *testing.T) {
	storagetest.RunQueue(t, func(*testing.T) storage.Queue { return queue.FromColly(&collyList{}) })
}

func TestInMemoryQueueStorageMaxSize(t *testing.T) {
	s := &queue.InMemoryQueueStorage{MaxSize: 2}
	ctx := t.Context()
	if err := s.Push(ctx, []byte("a"), []byte("b")); err != nil {
		t.Fatalf("Push(2) error = %v, want nil", err)
	}
	if err := s.Push(ctx, []byte("c")); !errors.Is(err, queue.ErrQueueFull) {
		t.Fatalf("Push() beyond MaxSize error = %v, want %v", err, queue.ErrQueueFull)
	}
}

func TestFromCollyPullsInOrder(t *testing.T) {
	ctx := t.Context()
	src := &collyList{}
	for _, d := range []string{"a", "b", "c"} {
		if err := src.AddRequest([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	q := queue.FromColly(src)
	defer q.Close()
	if l, err := q.Len(ctx); err != nil || l.Ready != 3 {
		t.Fatalf("Len() = %+v, %v; want Ready 3", l, err)
	}
	es, err := q.Lease(ctx, 2, time.Minute)
	if err != nil || len(es) != 2 || string(es[0].Data) != "a" || string(es[1].Data) != "b" {
		t.Fatalf("Lease(2) = %v, %v; want a, b", es, err)
	}
	if n, _ := src.QueueSize(); n != 1 {
		t.Errorf("Colly storage size after leasing 2 of 3 = %d, want 1 (only what is leased is taken)", n)
	}
}

func TestFromCollyGetRequestError(t *testing.T) {
	src := &collyList{failGet: errors.New("boom")}
	_ = src.AddRequest([]byte("a"))
	q := queue.FromColly(src)
	defer q.Close()
	if _, err := q.Lease(t.Context(), 1, time.Minute); err == nil || !errors.Is(err, src.failGet) {
		t.Fatalf("Lease() with a failing GetRequest error = %v, want %v", err, src.failGet)
	}
}

// collyList is a Colly-style queue storage: a mutex-guarded FIFO whose
// GetRequest returns nil, nil when empty, like Colly's in-memory storage.
type collyList struct {
	mu      sync.Mutex // guards items
	items   [][]byte
	failGet error
}

func (l *collyList) Init() error { return nil }

func (l *collyList) AddRequest(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, b)
	return nil
}

func (l *collyList) GetRequest() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failGet != nil {
		return nil, l.failGet
	}
	if len(l.items) == 0 {
		return nil, nil
	}
	b := l.items[0]
	l.items = l.items[1:]
	return b, nil
}

func (l *collyList) QueueSize() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items), nil
}
