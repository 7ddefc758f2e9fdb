package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// Visited marks that expire (Options.VisitedTTL) are one string key per ID,
// as in Colly's redisstorage: a member of a set cannot expire on its own.
// SET NX EX keeps the check-and-mark atomic on the server, so of all Stores
// adding an ID exactly one is told it added it, and after the TTL the next
// one is.

// ttlKey is the key of the expiring visited mark of id.
func (s *Store) ttlKey(id uint64) string { return s.prefix + ":vt:" + strconv.FormatUint(id, 10) }

func (s *Store) addVisitedTTL(ctx context.Context, ids []uint64, out []bool) ([]bool, error) {
	p := s.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.SetNX(ctx, s.ttlKey(id), 1, s.ttl)
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, s.wrap("add visited", err)
	}
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

func (s *Store) isVisitedTTL(id uint64) (bool, error) {
	n, err := s.rdb.Exists(context.Background(), s.ttlKey(id)).Result()
	return n == 1, s.wrap("is visited", err)
}

func (s *Store) removeVisitedTTL(ctx context.Context, ids []uint64) error {
	p := s.rdb.Pipeline()
	for _, id := range ids {
		p.Del(ctx, s.ttlKey(id))
	}
	_, err := p.Exec(ctx)
	return s.wrap("remove visited", err)
}

// pushUnvisitedTTL is PushUnvisited with expiring marks: it looks the keys
// up (see unvisitedTTL) and pushes the absent ones. Not atomic with the
// lookup, which costs nothing here: PushUnvisited marks nothing, and a
// second copy of an entry is refused as visited when it is leased.
func (s *Store) pushUnvisitedTTL(ctx context.Context, keys []uint64, data [][]byte) ([]bool, error) {
	if len(data) == 0 {
		return make([]bool, 0), nil
	}
	pushed, err := s.unvisitedTTL(ctx, keys)
	if err != nil {
		return nil, err
	}
	todo := make([][]byte, 0, len(data))
	for i, ok := range pushed {
		if ok {
			todo = append(todo, data[i])
		}
	}
	if len(todo) == 0 {
		return pushed, nil
	}
	if err := s.Push(ctx, todo...); err != nil {
		return nil, err
	}
	return pushed, nil
}

// unvisitedTTL reports, per key, whether its expiring mark is absent, with
// one pipelined EXISTS each.
func (s *Store) unvisitedTTL(ctx context.Context, keys []uint64) ([]bool, error) {
	p := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = p.Exists(ctx, s.ttlKey(k))
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, s.wrap("push unvisited", err)
	}
	absent := make([]bool, len(keys))
	for i, c := range cmds {
		absent[i] = c.Val() == 0
	}
	return absent, nil
}

// Storage is a Store configured the way Colly's redisstorage.Storage is, so
// that a Colly program keeps its literal and changes only the import:
//
//	s := &redisstore.Storage{Address: "127.0.0.1:6379", Prefix: "feeds", Expires: 6 * time.Hour}
//	if err := c.SetStorage(s); err != nil { ... }  // calls Init
//	q, err := queue.New(4, s)                      // the same crawl's queue
//	defer s.Close()
//
// Init connects (Collector.SetStorage and queue.New call it; calling it
// again does nothing) and the embedded *Store does the rest: visited set,
// cookies and a leased, at-least-once queue, where Colly's pops for good.
// Before Init, its visited, cookie and queue methods return
// ErrNotInitialized. Safe for concurrent use after Init. The caller must
// Close it.
type Storage struct {
	// Address, Password and DB select the server; Address is ignored when
	// Client is set.
	Address  string
	Password string
	DB       int
	// Prefix starts every key of the crawl (Options.Prefix; "magpie" when
	// empty). Stores with the same prefix share one crawl.
	Prefix string
	// Client, when set, is used instead of a new connection (a Client,
	// ClusterClient or FailoverClient of go-redis v9); Close leaves it open.
	Client redis.UniversalClient
	// Expires, when positive, makes visited marks expire that long after
	// they were made (Options.VisitedTTL), so that a feed crawled every
	// round is fetched again. 0 keeps them until Clear.
	Expires time.Duration

	// mu guards the embedded Store's creation.
	mu sync.Mutex
	*Store
}

// Init connects to the server once; later calls only check it answers. It
// implements storage.Storage and the Init queue.New calls.
func (c *Storage) Init() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Store != nil {
		return c.Store.Init()
	}
	opts := Options{Addr: c.Address, Password: c.Password, DB: c.DB, Prefix: c.Prefix, VisitedTTL: c.Expires}
	var (
		s   *Store
		err error
	)
	if c.Client != nil {
		s, err = NewFromClient(c.Client, opts)
	} else {
		s, err = New(opts)
	}
	if err != nil {
		return fmt.Errorf("redisstore: Storage.Init: %w", err)
	}
	c.Store = s
	return nil
}

// Close closes the Store Init made; before Init it does nothing.
func (c *Storage) Close() error {
	c.mu.Lock()
	s := c.Store
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}

var (
	_ storage.Storage     = (*Storage)(nil)
	_ storage.VisitedSet  = (*Storage)(nil)
	_ storage.CookieStore = (*Storage)(nil)
	_ storage.Queue       = (*Storage)(nil)
)
