package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster maps keys to slots with.
func crc16(b string) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc ^= uint16(b[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// hashTag returns the part of key that Redis Cluster hashes: the text
// between the first '{' and the first '}' after it, when that is not empty;
// else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// keySlot is the cluster slot of key.
func keySlot(key string) int { return int(crc16(hashTag(key))) % clusterSlots }

// tagged reports whether prefix carries a hash tag, which puts every key of
// the crawl in one slot (the layout of earlier versions in a cluster).
func tagged(prefix string) bool { return hashTag(prefix) != prefix }

// partitionTag returns the hash tag section of partition i of n, such as
// "{magpie:q1.4}:". The tag is the first "<prefix>:q<i>.<j>" whose slot lies
// in the middle half of the i-th n-th of the slot space: a cluster whose
// masters hold equal ranges of slots in order (what redis-cli --cluster
// create makes) gets one partition per master, and every process computes
// the same names without asking the cluster. With a tagged prefix every
// key is in the prefix's slot anyway, and j stays 0.
func partitionTag(prefix string, i, n int) string {
	tag := func(j int) string { return prefix + ":q" + strconv.Itoa(i) + "." + strconv.Itoa(j) }
	if tagged(prefix) || n < 2 {
		return "{" + tag(0) + "}:"
	}
	lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n
	w := hi - lo
	for j := 0; ; j++ {
		// About 2n tries are needed on average; the bound only guards
		// against an n so large that a range is empty.
		if slot := keySlot(tag(j)); (slot >= lo+w/4 && slot < hi-w/4) || w < 4 || j > 1<<20 {
			return "{" + tag(j) + "}:"
		}
	}
}

// newClusterClient is New's client for Options.ClusterAddrs. It never
// sends a command twice: go-redis retries a command or a pipeline whose
// reply was lost under the same setting (MaxRedirects) that follows MOVED
// and ASK, and a re-sent SADD would report the mark its first run set as
// another process's, so that the entry would be refused as visited and
// lost. A redirect is returned as an error instead; the client then
// reloads the slot map (see Store.wrap) and the queue run retries the
// operation, as it does every failed one.
func newClusterClient(opts Options) redis.UniversalClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: opts.ClusterAddrs, Password: opts.Password, MaxRetries: -1, MaxRedirects: -1,
	})
}

// countMasters returns how many masters serve the cluster.
func countMasters(ctx context.Context, cc *redis.ClusterClient) (int, error) {
	var n atomic.Int64
	err := cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
		n.Add(1)
		return nil
	})
	return int(n.Load()), err
}

// agreeCount settles a count every Store of the crawl must share (the
// partitions: a host's entries must go to one partition in every process;
// the visited shards: a URL's mark must be found in one shard): the first
// Store to open the crawl records its count at key, and the others adopt
// it. want is the Options field (0: the default, def); what names it in
// errors.
func agreeCount(ctx context.Context, rdb redis.UniversalClient, key, what string, want, def int) (int, error) {
	n := want
	if n == 0 {
		n = def
	}
	if err := rdb.SetNX(ctx, key, n, 0).Err(); err != nil {
		return 0, fmt.Errorf("redisstore: recording the crawl's %s: %w", what, err)
	}
	stored, err := rdb.Get(ctx, key).Int()
	if errors.Is(err, redis.Nil) {
		// Cleared in between: this Store's count stands.
		return n, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisstore: reading the crawl's %s: %w", what, err)
	}
	if want != 0 && stored != want {
		return 0, fmt.Errorf("%w: Options.%s is %d, the crawl in Redis has %d", ErrLayoutMismatch, what, want, stored)
	}
	if stored < 1 {
		return 0, fmt.Errorf("%w: the crawl in Redis records %d %s", ErrLayoutMismatch, stored, what)
	}
	return stored, nil
}

// replicaWait bounds how long a push waits for a replica to confirm it.
const replicaWait = 2 * time.Second

// durableScript runs a writing script on the master of key and, when that
// master has replicas, waits (WAIT) until one of them has the write, on the
// same connection: a master that dies after answering cannot take the
// write with it when its replica is promoted. A master without a connected
// replica (say, a promoted one whose old master is gone) answers after the
// script alone, as a single server would. The script's reply is returned;
// countReplicas must make the script report the master's connected replicas
// as the last element of its reply, which is removed.
func (s *Store) durableScript(ctx context.Context, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok || !s.cluster {
		res, err := script.Run(ctx, s.rdb, keys, args...).Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(res) == 0 {
			return nil, errBadReply
		}
		return res[:len(res)-1], nil
	}
	node, err := cc.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	conn := node.Conn()
	defer conn.Close()
	res, err := script.Run(ctx, conn, keys, args...).Int64Slice()
	if err != nil {
		// MOVED after a failover or a resharding, or the master is gone:
		// the next try must find the slot's master anew.
		cc.ReloadState(ctx)
		return nil, err
	}
	if len(res) == 0 {
		return nil, errBadReply
	}
	replicas := res[len(res)-1]
	res = res[:len(res)-1]
	if replicas == 0 {
		return res, nil
	}
	got, err := conn.Wait(ctx, 1, replicaWait).Result()
	if err != nil {
		return nil, err
	}
	if got < 1 {
		return nil, fmt.Errorf("%w within %v", ErrNotReplicated, replicaWait)
	}
	return res, nil
}

// countReplicas is Lua that sets `replicas` to the server's connected
// replicas (0 outside a cluster, where pushes do not wait for them).
const countReplicas = `
local replicas = 0
if ARGV[1] == '1' then
	replicas = tonumber(string.match(redis.call('INFO', 'replication'), 'connected_slaves:(%d+)')) or 0
end
`
