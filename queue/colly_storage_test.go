package queue_test

import (
	"errors"
	"testing"

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
