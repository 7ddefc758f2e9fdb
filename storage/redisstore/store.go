package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// Compile-time checks that Store implements every interface it promises.
var (
	_ storage.Storage     = (*Store)(nil)
	_ storage.VisitedSet  = (*Store)(nil)
	_ storage.CookieStore = (*Store)(nil)
	_ storage.Queue       = (*Store)(nil)
)

// DefaultVisitedShards is the number of sets the visited IDs are spread
// over when Options.VisitedShards is 0: a million IDs make about 244 per
// set, well under Redis's default set-max-intset-entries (512), so every
// set stays in the compact intset encoding (8 bytes per ID).
const DefaultVisitedShards = 4096

// group is the stream's consumer group; every Store sharing a prefix joins it.
const group = "magpie"

// Options configures New and NewFromClient.
type Options struct {
	// Addr, Password and DB select the server, as in redis.Options. New
	// uses them; NewFromClient ignores them.
	Addr     string
	Password string
	DB       int
	// Prefix starts every key of the crawl; Stores with the same prefix
	// share one crawl. The default is "magpie". In Redis Cluster, put a
	// hash tag in it ("{crawl1}") so the queue's keys share a slot.
	Prefix string
	// MaxSize makes Push fail with storage.ErrQueueFull when the queue
	// would hold more than MaxSize entries (leased and delayed ones
	// included). 0 means no limit.
	MaxSize int
	// VisitedShards is the number of sets holding visited IDs; 0 means
	// DefaultVisitedShards. Keep it above the crawl's URLs ÷ 250, so that
	// every set stays a compact intset. The first Store to open a crawl
	// records it in Redis and later ones adopt it; a different non-zero
	// value fails with ErrLayoutMismatch.
	VisitedShards int
	// VisitedTTL, when positive, makes each visited mark expire that long
	// after it was made, so a later round crawls the URL again (Colly's
	// redisstorage Expires). See colly.go. Every Store of a crawl must use
	// the same setting.
	VisitedTTL time.Duration
	// ClusterAddrs, when set, makes New connect to a Redis Cluster through
	// these seed nodes (host:port; one is enough, more survive one being
	// down) instead of Addr. Password applies; DB does not (a cluster has
	// one database). NewFromClient ignores it.
	ClusterAddrs []string
	// Partitions splits the frontier into this many queues, each a stream
	// with its lease keys under one hash tag; an entry goes to the
	// partition of its URL's host. 0 means one per master of a cluster
	// client, and 1 (the single stream of earlier versions) otherwise. The
	// first Store to open a crawl records the count in Redis and later ones
	// adopt it; a different non-zero value fails with ErrLayoutMismatch.
	// With more than one partition, MaxSize holds per partition (MaxSize
	// divided by the count, rounded up).
	Partitions int
	// NoReplicaWait makes pushes and acknowledgements on a cluster return
	// without waiting for a replica of their master to confirm them (see
	// the package doc): fewer round trips, but a master that dies right
	// after answering may take the last links pushed to it with it.
	NoReplicaWait bool
}

// Store keeps a crawl's visited set, cookies and queue in Redis, shared by
// every Store (in this process or another, on this host or another) with
// the same prefix. Create it with New or NewFromClient; it is safe for
// concurrent use and the caller must Close it. After Close every method
// returns storage.ErrClosed.
type Store struct {
	rdb       redis.UniversalClient
	ownClient bool // Close closes rdb only when New created it
	prefix    string
	maxSize   int
	shards    uint64
	ttl       time.Duration // Options.VisitedTTL
	consumer  string
	// epoch is the crawl's epoch as this Store adopted it (see reset.go).
	epoch atomic.Pointer[string]
	// closed is shared with the partitions' Stores.
	closed *atomic.Bool

	// tag is "" for the crawl's Store and, for one of its partitions, the
	// hash tag section every key of the partition's queue carries
	// ("{magpie:q1.4}:", see partitionTag).
	tag string
	// parts are the partitions of a partitioned frontier, nil for the
	// single stream of earlier versions; each is a Store whose queue keys
	// carry its tag. See partition.go.
	parts []*Store
	// leaseErr is a Lease failure to report on the next Lease (leaseParts).
	leaseErr atomic.Pointer[error]
	// ids numbers the entries this Store pushes to partitions (pushIDs).
	ids idClock
	// cluster is set for a cluster client and a prefix without a hash tag:
	// the keys are spread over the slots, and pushes wait for a replica
	// unless noWait.
	cluster bool
	noWait  bool
}

// New connects to the server in opts (Addr), or to the cluster
// (ClusterAddrs). It fails when the server cannot be reached, so a typo in
// Addr is found at once.
func New(opts Options) (*Store, error) {
	if opts.Addr == "" && len(opts.ClusterAddrs) == 0 {
		return nil, fmt.Errorf("%w: empty Addr", ErrInvalidArgument)
	}
	// No client-side retries: the queue scripts are not idempotent (a Lease
	// re-run after a lost reply would grant entries nobody knows of), and
	// magpie's queue runs retry failed operations themselves, with backoff,
	// reporting the outage (see magpie.ErrStorageUnavailable).
	var rdb redis.UniversalClient
	if len(opts.ClusterAddrs) > 0 {
		rdb = newClusterClient(opts)
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: opts.Addr, Password: opts.Password, DB: opts.DB, MaxRetries: -1})
	}
	s, err := NewFromClient(rdb, opts)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}

// NewFromClient uses an existing client, which Close leaves open: the
// caller owns it. Any redis.UniversalClient serves: a Client (one server), a
// FailoverClient (Sentinel) or a ClusterClient; with a ClusterClient and a
// prefix without a hash tag the crawl's keys are spread over the cluster
// (see Options.Partitions and the package doc). Give the client the
// settings New uses, so that it never sends a command twice (a script re-run
// after a lost reply is not idempotent): MaxRetries -1 and, for a cluster,
// MaxRedirects -1.
func NewFromClient(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidArgument)
	}
	if opts.MaxSize < 0 || opts.VisitedShards < 0 || opts.Partitions < 0 || opts.VisitedTTL < 0 {
		return nil, fmt.Errorf("%w: negative MaxSize, VisitedShards, Partitions or VisitedTTL", ErrInvalidArgument)
	}
	s := &Store{rdb: rdb, prefix: opts.Prefix, maxSize: opts.MaxSize, ttl: opts.VisitedTTL, closed: new(atomic.Bool), noWait: opts.NoReplicaWait}
	if s.prefix == "" {
		s.prefix = "magpie"
	}
	host, _ := os.Hostname()
	s.consumer = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()>>32, 36)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: connect: %w", err)
	}
	shards, err := agreeCount(ctx, rdb, s.key("visited-shards"), "VisitedShards", opts.VisitedShards, DefaultVisitedShards)
	if err != nil {
		return nil, err
	}
	s.shards = uint64(shards)
	if err := s.partition(ctx, opts.Partitions); err != nil {
		return nil, err
	}
	if err := s.adoptEpoch(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: connect: %w", err)
	}
	return s, nil
}

// Init implements storage.Storage: it checks that the server answers.
func (s *Store) Init() error {
	if err := s.check(); err != nil {
		return err
	}
	return s.wrap("init", s.rdb.Ping(context.Background()).Err())
}

// Close returns the leases this Store still holds to the queue (ready at
// once, in their place), so another consumer or a restarted crawl gets them
// without waiting for their TTL, and closes the client if New created it.
// The crawl's keys stay in Redis; Clear removes them. Calling Close again
// returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.releaseOwn(ctx)
	if s.ownClient {
		if cerr := s.rdb.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// releaseOwn releases every entry in this consumer's pending list whose
// lease is still held, a page at a time, then its hosted leases.
func (s *Store) releaseOwn(ctx context.Context) error {
	if s.parts != nil {
		return s.releaseOwnParts(ctx)
	}
	if err := s.releaseOwnStream(ctx); err != nil {
		return err
	}
	return s.releaseHosted(ctx, nil)
}

// releaseOwnStream releases the stream's entries leased to this consumer.
func (s *Store) releaseOwnStream(ctx context.Context) error {
	start := "-"
	for {
		pend, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: s.key("queue"), Group: group, Consumer: s.consumer, Start: start, End: "+", Count: 1000,
		}).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				return nil // the stream was never used
			}
			return err
		}
		if len(pend) == 0 {
			return nil
		}
		ids := make([]any, len(pend))
		for i, p := range pend {
			ids[i] = p.ID
		}
		if err := releaseAllScript.Run(ctx, s.rdb, []string{s.key("leases"), s.key("expiry"), s.key("delayed")}, ids...).Err(); err != nil {
			return err
		}
		if len(pend) < 1000 {
			return nil
		}
		start = "(" + pend[len(pend)-1].ID
	}
}

// Clear deletes every key of the crawl (its prefix), with SCAN and DEL so
// the server is never blocked the way KEYS would block it.
func (s *Store) Clear(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := deleteByPattern(ctx, s.rdb, s.prefix+":*"); err != nil {
		return s.wrap("clear", err)
	}
	// redis_rate prefixes its keys with "rate:".
	if err := deleteByPattern(ctx, s.rdb, "rate:"+s.prefix+":*"); err != nil {
		return s.wrap("clear", err)
	}
	// A fresh crawl begins: this Store takes a new epoch (other Stores of
	// the prefix find theirs gone).
	return s.wrap("clear", s.adoptEpoch(ctx))
}

// deleteByPattern deletes the keys matching pattern. On a cluster it scans
// every master.
func deleteByPattern(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 1000 {
				if err := unlink(ctx, c, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return unlink(ctx, c, batch)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, rdb)
}

// unlink deletes keys one command each, so it works across cluster slots.
func unlink(ctx context.Context, c redis.UniversalClient, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	p := c.Pipeline()
	for _, k := range keys {
		p.Unlink(ctx, k)
	}
	_, err := p.Exec(ctx)
	return err
}

func (s *Store) key(name string) string { return s.prefix + ":" + s.tag + name }

func (s *Store) check() error {
	if s == nil {
		return ErrNotInitialized // a Storage used before Init
	}
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// wrap names the failed operation and turns errors caused by Close into
// ErrClosed; other Redis errors stay reachable with errors.Is/As.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() || errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: %s: %w", op, storage.ErrClosed)
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// A master may have failed over: find the slots' masters anew
		// (in the background, once however many calls fail) rather than
		// wait for the client's periodic reload.
		cc.ReloadState(context.Background())
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}
