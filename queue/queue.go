package queue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/internal/runlink"
	"github.com/magpiecrawl/magpie/storage"
)

// Storage is what New accepts as the place a Queue keeps its pending
// requests: either a storage.Queue (InMemoryQueueStorage,
// storage/sqlitestore, storage/redisstore: leased, at-least-once) or a Colly
// queue storage, one with Colly's AddRequest, GetRequest and QueueSize
// methods (CollyStorage, such as gocolly/redisstorage or
// colly-sqlite3-storage: at-most-once, as in Colly), which New adapts with
// FromColly. A value that is both is used as a storage.Queue. Any other
// value makes New return ErrUnsupportedStorage; the type is an empty
// interface because Go cannot spell "one of two method sets", so that a
// Colly program's queue.New(n, &redisstorage.Storage{...}) compiles
// unchanged.
type Storage any

// DefaultMaxSize is the MaxSize of the in-memory storage New creates when
// given none, as in Colly.
const DefaultMaxSize = 100000

// Queue is a consumer-thread queue: requests are added to its Storage with
// AddURL and AddRequest, and Run crawls them with Threads concurrent
// downloads, pushing every request the callbacks discover back into the same
// Storage, until the Storage is empty and nothing is in flight.
//
// Create one with New. A Queue is safe for concurrent use: AddURL and
// AddRequest never block and may be called before, during and after Run;
// Run may be called again after it returns; Stop may be called from any
// goroutine, callbacks included. The Queue does not close its Storage: the
// caller who created a storage closes it (New's default in-memory storage
// needs no closing).
type Queue struct {
	// Threads is the number of concurrent downloads Run uses. It is read
	// when Run starts.
	Threads int

	storage storage.Queue
	// adds takes AddURL and AddRequest calls to the running Run's frontier.
	adds runlink.Sink[*magpie.Request]

	// mu guards running, cancel and stopped.
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	stopped bool
}

// New returns a Queue running threads concurrent downloads over s: a
// storage.Queue, or a Colly queue storage (see Storage), which is wrapped
// with FromColly. A nil s means a fresh
// &InMemoryQueueStorage{MaxSize: DefaultMaxSize}. If s has an Init() error
// method (as Colly storages do) New calls it. Any other s returns
// ErrUnsupportedStorage.
//
// threads is the run's download concurrency, whatever the collector's
// Workers: at most threads requests are in flight in all, and a LimitRule's
// Parallelism caps each host within them, so a host gets min(Parallelism,
// threads) at once, and all the threads when no rule limits it (see
// magpie.Collector.Limit). For a crawl that resumes, give one store to both
// New and the collector's SetStorage: sqlitestore and redisstore serve the
// queue and the visited set together, so a resumed run skips the pages done.
func New(threads int, s Storage) (*Queue, error) {
	if threads < 1 {
		return nil, fmt.Errorf("%w: got %d", ErrInvalidThreads, threads)
	}
	var qs storage.Queue
	switch v := s.(type) {
	case nil:
		qs = &InMemoryQueueStorage{MaxSize: DefaultMaxSize}
	case storage.Queue:
		qs = v
	case CollyStorage:
		qs = FromColly(v)
	default:
		return nil, fmt.Errorf("%w: %T has neither storage.Queue's Push/Lease/Ack/Release/Len/Close nor Colly's Init/AddRequest/GetRequest/QueueSize",
			ErrUnsupportedStorage, s)
	}
	if i, ok := qs.(interface{ Init() error }); ok {
		if err := i.Init(); err != nil {
			return nil, fmt.Errorf("queue: init storage: %w", err)
		}
	}
	return &Queue{Threads: threads, storage: qs}, nil
}

// Storage returns the storage.Queue the queue runs over: the one given to
// New, or, for a Colly queue storage, the FromColly adapter around it.
func (q *Queue) Storage() storage.Queue { return q.storage }

// AddURL adds a GET request for u at depth 1 (the depth of c.Visit; Colly
// uses 0). The URL is checked by the Collector when the request runs (a
// refusal then reaches OnRefused), except that here it must parse and be
// absolute: a URL without a scheme ("?n=0", "/a") returns an error wrapping
// magpie.ErrInvalidURL, and an http(s) URL without a host one wrapping
// magpie.ErrMissingURL, and is not stored, since no page could resolve it
// later (Colly stores it and it fails silently). During this Queue's Run
// the request joins the batch of links being stored, as AddRequest says.
func (q *Queue) AddURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("queue: AddURL(%q): %w: %w", u, magpie.ErrInvalidURL, err)
	}
	return q.AddRequest(&magpie.Request{
		URL:     p,
		Method:  http.MethodGet,
		Depth:   1,
		Headers: &http.Header{},
		Ctx:     magpie.NewContext(),
	})
}

// AddRequest adds r, encoded with r.Marshal, to the storage. It never waits
// for a running crawl. It returns an error wrapping magpie.ErrInvalidURL or
// magpie.ErrMissingURL, as AddURL does, for a URL that is missing, relative
// or without a host.
//
// Outside Run it pushes r at once and returns ErrQueueFull when the storage
// is full; a storage that leases by host (storage.HostQueue) gets r's host
// and r.Priority with it (an error wrapping magpie.ErrPriorityRange for a
// priority outside the int32 range). A Prioritize hook runs at admission,
// so it ranks the links of the run, not what was added before it. During this Queue's Run (from its callbacks, typically) r joins
// the links of the pages being crawled: it is checked against the visited
// set and pushed with them in one round trip, before any page that
// finishes after the call is acknowledged, so a crash loses nothing. A
// request already visited, or already added or visited-to during the run
// and not crawled yet, is then not stored but refused (OnRefused,
// Stats().Refused["visited"]), as its lease would have refused it, and so
// is one the collector refuses for its URL alone (scheme, MaxDepth,
// AllowedDomains and the other domain and URL filters); a full
// storage refuses it with ErrQueueFull the same way (Stats().Refused
// ["queue_full"]) instead of the call returning the error.
func (q *Queue) AddRequest(r *magpie.Request) error {
	if r == nil {
		return errors.New("queue: AddRequest(nil)")
	}
	if err := checkAbsolute(r.URL); err != nil {
		return fmt.Errorf("queue: AddRequest: %w", err)
	}
	if taken, err := q.adds.Add(r); taken {
		if err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		return nil
	}
	data, err := r.Marshal()
	if err != nil {
		return fmt.Errorf("queue: marshal request: %w", err)
	}
	if hq, ok := q.storage.(storage.HostQueue); ok {
		// Leased by host and priority, as the run pushes its links.
		return hq.PushHosted(context.Background(), storage.HostEntry{Host: r.URL.Host, Priority: r.Priority, Data: data})
	}
	return q.storage.Push(context.Background(), data)
}

// checkAbsolute refuses a URL no request could be sent to wherever it runs:
// nil, without a scheme, or http(s) without a host. Other schemes (file://
// through a transport registered for it) are left to the Collector.
func checkAbsolute(u *url.URL) error {
	switch {
	case u == nil:
		return magpie.ErrMissingURL
	case u.Scheme == "":
		return fmt.Errorf("%w: %q is not absolute (no scheme)", magpie.ErrInvalidURL, u)
	case (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() == "":
		return fmt.Errorf("%w: no host in %q", magpie.ErrMissingURL, u)
	}
	return nil
}

// Size returns the number of requests not yet done: pending and in flight.
func (q *Queue) Size() (int, error) {
	l, err := q.storage.Len(context.Background())
	if err != nil {
		return 0, err
	}
	return l.Total(), nil
}

// IsEmpty reports whether Size is 0; a storage error counts as not empty.
func (q *Queue) IsEmpty() bool {
	n, err := q.Size()
	return err == nil && n == 0
}

// Run crawls the queue with c until the storage is empty and nothing is in
// flight, or until Stop. It is RunContext with context.Background().
func (q *Queue) Run(c *magpie.Collector) error {
	return q.RunContext(context.Background(), c)
}

// RunContext crawls the queue with c until the storage is empty and nothing
// is in flight, until Stop, or until ctx is done. Requests that callbacks
// discover go into the same storage. It waits for the whole crawl even with
// an Async collector. The error joins one error per undecodable entry
// (errors.Is magpie.ErrUndecodableRequest) with ctx's error if ctx ended the
// run; after Stop it is nil unless entries were undecodable. Requests not
// finished stay in the storage for a later Run. A second Run while one is running returns
// ErrRunning.
//
// With the collector's MaxRequests spent, Run leases no more entries and
// returns nil once the requests in flight are done; the rest stays in the
// storage, neither refused nor deleted. A storage that fails for good ends
// the run with an error wrapping storage.ErrStoreReset (it lost its
// contents: a Redis server restarted without persistence) or
// storage.ErrStoreUnusable (a damaged or read-only SQLite file); a storage
// that is only unreachable pauses the run until it is back. Links that a
// storage with a maximum size cannot take are refused with ErrQueueFull.
func (q *Queue) RunContext(ctx context.Context, c *magpie.Collector) error {
	if c == nil {
		return ErrNilCollector
	}
	q.mu.Lock()
	if q.running {
		q.mu.Unlock()
		return ErrRunning
	}
	runCtx, cancel := context.WithCancel(runlink.With(ctx, &q.adds))
	q.running, q.cancel, q.stopped = true, cancel, false
	threads := q.Threads
	q.mu.Unlock()

	err := c.RunQueue(runCtx, q.storage, max(threads, 1))

	q.mu.Lock()
	stopped := q.stopped
	q.running, q.cancel = false, nil
	q.mu.Unlock()
	cancel()
	if stopped && ctx.Err() == nil {
		return withoutCanceled(err)
	}
	return err
}

// withoutCanceled drops the context.Canceled that Stop causes from err,
// keeping any other error joined with it (undecodable entries).
func withoutCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			var keep []error
			for _, e := range j.Unwrap() {
				if !errors.Is(e, context.Canceled) {
					keep = append(keep, e)
				}
			}
			return errors.Join(keep...)
		}
		if err == context.Canceled {
			return nil
		}
	}
	return err
}

// Stop asks a running Run to return. It does not wait: in-flight requests
// finish or are released back to the storage, and then Run returns. Stop
// when nothing runs does nothing.
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		q.stopped = true
		q.cancel()
	}
}
