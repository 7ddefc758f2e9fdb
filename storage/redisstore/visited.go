package redisstore

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// visitedKey and member place an ID: the member is the int64 with the same
// bits, in decimal, so Redis stores it as an integer (intset) rather than
// as a string.
func (s *Store) visitedKey(id uint64) string {
	return s.prefix + ":v:" + strconv.FormatUint(id%s.shards, 10)
}

func member(id uint64) string { return strconv.FormatInt(int64(id), 10) }

// Visited marks requestID visited.
func (s *Store) Visited(requestID uint64) error {
	_, err := s.AddVisited(context.Background(), requestID)
	return err
}

// IsVisited reports whether requestID is visited.
func (s *Store) IsVisited(requestID uint64) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if s.ttl > 0 {
		return s.isVisitedTTL(requestID)
	}
	ok, err := s.rdb.SIsMember(context.Background(), s.visitedKey(requestID), member(requestID)).Result()
	return ok, s.wrap("is visited", err)
}

// AddVisited implements storage.VisitedSet with one SADD per ID, pipelined
// in one round trip. SADD is atomic on the server, so of all the Stores that
// add an ID exactly one is told true. A batch is not atomic as a whole: on
// error some IDs may be marked, and the caller should treat the whole batch
// as failed.
func (s *Store) AddVisited(ctx context.Context, ids ...uint64) ([]bool, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	if s.ttl > 0 {
		return s.addVisitedTTL(ctx, ids, out)
	}
	p := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.SAdd(ctx, s.visitedKey(id), member(id))
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, s.wrap("add visited", err)
	}
	for i, c := range cmds {
		out[i] = c.Val() == 1
	}
	return out, nil
}

// RemoveVisited implements storage.VisitedSet; absent IDs are ignored.
func (s *Store) RemoveVisited(ctx context.Context, ids ...uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if s.ttl > 0 {
		return s.removeVisitedTTL(ctx, ids)
	}
	p := s.rdb.Pipeline()
	for _, id := range ids {
		p.SRem(ctx, s.visitedKey(id), member(id))
	}
	_, err := p.Exec(ctx)
	return s.wrap("remove visited", err)
}

// Cookies implements storage.Storage; it returns "" on error, as the
// interface has no error result. GetCookies reports errors.
func (s *Store) Cookies(u *url.URL) string {
	c, _ := s.GetCookies(context.Background(), u)
	return c
}

// SetCookies implements storage.Storage; errors are dropped, as the
// interface has no error result. PutCookies reports them.
func (s *Store) SetCookies(u *url.URL, cookies string) {
	_ = s.PutCookies(context.Background(), u, cookies)
}

// GetCookies implements storage.CookieStore: the cookies of u's host that
// apply to u, as newline-joined Set-Cookie lines, attributes kept.
func (s *Store) GetCookies(ctx context.Context, u *url.URL) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	stored, err := s.rdb.Get(ctx, s.key("c:"+storage.CookieHost(u))).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("get cookies", err)
	}
	return storage.SelectCookies(stored, u, time.Now()), nil
}

// maxCookieRetries bounds PutCookies' optimistic retries when other
// writers keep changing the same host's cookies.
const maxCookieRetries = 16

// PutCookies implements storage.CookieStore: it merges newline-joined
// Set-Cookie lines received from u into its host's cookies, by name. The
// read-merge-write runs in a WATCH transaction, so concurrent writers from
// other processes are not lost.
func (s *Store) PutCookies(ctx context.Context, u *url.URL, cookies string) error {
	if err := s.check(); err != nil {
		return err
	}
	key := s.key("c:" + storage.CookieHost(u))
	txf := func(tx *redis.Tx) error {
		stored, err := tx.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		merged := storage.MergeCookies(stored, cookies, time.Now())
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if merged == "" {
				p.Del(ctx, key)
			} else {
				p.Set(ctx, key, merged, 0)
			}
			return nil
		})
		return err
	}
	var err error
	for range maxCookieRetries {
		if err = s.rdb.Watch(ctx, txf, key); !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	return s.wrap("put cookies", err)
}
