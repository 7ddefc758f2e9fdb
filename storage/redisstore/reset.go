package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// A Redis server restarted without persistence comes back empty, and the
// queue scripts recreate the stream they find missing: without a mark of
// its own, a Store would take the wiped queue for an empty one and a crawl
// would end as if finished. The epoch key is that mark: a random value set
// by the first Store of a crawl and adopted by the others (and by a Store
// reopened on the same prefix), which CheckReset compares. A partitioned
// frontier has one epoch key per partition, under the partition's hash tag,
// so that on a cluster a master that comes back empty is noticed whichever
// partitions it held.

var _ storage.ResetDetector = (*Store)(nil)

// epochScript: KEYS epoch; ARGV a fresh value. Sets the epoch when it is
// missing, and returns the epoch.
var epochScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// adoptEpoch reads the crawl's epoch, setting a fresh one when there is
// none, and remembers it; the same for each partition.
func (s *Store) adoptEpoch(ctx context.Context) error {
	for _, p := range s.parts {
		if err := p.adoptEpoch(ctx); err != nil {
			return err
		}
	}
	fresh := strconv.FormatUint(rand.Uint64(), 36)
	v, err := epochScript.Run(ctx, s.rdb, []string{s.key("epoch")}, fresh).Text()
	if err != nil {
		return err
	}
	s.epoch.Store(&v)
	return nil
}

// CheckReset implements storage.ResetDetector: it returns an error wrapping
// storage.ErrStoreReset when the crawl's epoch key is gone or differs from
// the one this Store adopted when it was opened: the server lost the
// crawl's keys (restarted without persistence, FLUSHALL, or a Clear by
// another Store). A server that evicts keys (a maxmemory policy other than
// noeviction) can evict it too; such a server loses queue entries as well.
func (s *Store) CheckReset(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	v, err := s.rdb.Get(ctx, s.key("epoch")).Result()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		return s.wrap("check reset", err)
	}
	if p := s.epoch.Load(); p == nil || *p != v {
		return fmt.Errorf("redisstore: the crawl's keys under %q are gone (a server restarted without persistence, or the keys deleted): %w",
			s.prefix+":"+s.tag, storage.ErrStoreReset)
	}
	for _, p := range s.parts {
		if err := p.CheckReset(ctx); err != nil {
			return err
		}
	}
	return nil
}

// pendingError turns the failure of a read of this consumer's pending
// entries into the error to return. NOGROUP means the stream or its group
// is missing: nothing is pending, unless the server lost them, which
// CheckReset tells.
func (s *Store) pendingError(ctx context.Context, op string, err error) error {
	if !strings.HasPrefix(err.Error(), "NOGROUP") {
		return s.wrap(op, err)
	}
	if rerr := s.CheckReset(ctx); rerr != nil {
		return rerr
	}
	return nil
}
