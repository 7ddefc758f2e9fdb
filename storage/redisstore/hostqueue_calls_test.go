package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// countingScript is src run so that every command it calls adds one to
// the integer at key; its reply is src's.
func countingScript(src, key string) *redis.Script {
	return redis.NewScript(`local calls, base = 0, redis
local redis = setmetatable({
	call = function(...) calls = calls + 1 return base.call(...) end,
	pcall = function(...) calls = calls + 1 return base.pcall(...) end,
}, {__index = base})
local function body()
` + src + `
end
local res = body()
base.call('INCRBY', '` + key + `', calls)
return res`)
}

// countCalls runs f with *script replaced by a counting copy of src, and
// returns how many commands the script called in all.
func countCalls(t *testing.T, s *Store, script **redis.Script, src string, f func()) int {
	t.Helper()
	key := s.key("test:calls")
	old := *script
	*script = countingScript(src, key)
	defer func() { *script = old }()
	f()
	n, err := s.rdb.GetDel(context.Background(), key).Int()
	if err != nil {
		t.Fatalf("GETDEL %s: %v", key, err)
	}
	return n
}

// The host queue's scripts call Redis a bounded number of times per host
// they touch, with the rest batched in one call per key: a call from a
// script costs the server about as much as the data it moves, so that a
// broad crawl's lease, push, acknowledgement and ready times cost a few
// calls per host and not ten.
func TestHostQueueCallsPerHost(t *testing.T) {
	redisAddr(t)
	const hosts = 64
	host := func(i int) string { return fmt.Sprintf("h%d.example:80", i) }
	ctx := context.Background()
	// fill pushes per entries to each host, and returns the store.
	fill := func(t *testing.T, per int) *Store {
		s := newTestStore(t, Options{})
		var es []storage.HostEntry
		for i := range hosts * per {
			es = append(es, storage.HostEntry{Host: host(i % hosts), Data: fmt.Appendf(nil, "e%d", i)})
		}
		if err := s.PushHosted(ctx, es...); err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		// The calls are at most perHost per host, plus fixed.
		perHost, fixed int
		run            func(t *testing.T) int
	}{{
		name: "PushHosted new hosts", perHost: 3, fixed: 20,
		run: func(t *testing.T) int {
			s := fill(t, 1)
			var es []storage.HostEntry
			for i := range hosts {
				es = append(es, storage.HostEntry{Host: "new-" + host(i), Priority: 1, Data: []byte("x")})
			}
			return countCalls(t, s, &hqPushScript, hqPushSrc, func() {
				if err := s.PushHosted(ctx, es...); err != nil {
					t.Fatal(err)
				}
			})
		},
	}, {
		name: "PushHosted new heads", perHost: 3, fixed: 20,
		run: func(t *testing.T) int {
			s := fill(t, 1)
			var es []storage.HostEntry
			for i := range hosts {
				es = append(es, storage.HostEntry{Host: host(i), Priority: 5, Data: []byte("x")})
			}
			return countCalls(t, s, &hqPushScript, hqPushSrc, func() {
				if err := s.PushHosted(ctx, es...); err != nil {
					t.Fatal(err)
				}
			})
		},
	}, {
		name: "LeaseHosts", perHost: 3, fixed: 40,
		run: func(t *testing.T) int {
			s := fill(t, 3)
			return countCalls(t, s, &hqLeaseHostsScript, hqLeaseHostsSrc, func() {
				es, err := s.LeaseHosts(ctx, now, 2*hosts, 2, time.Minute)
				if err != nil || len(es) != 2*hosts {
					t.Fatalf("LeaseHosts() = %d entries, %v; want %d", len(es), err, 2*hosts)
				}
			})
		},
	}, {
		name: "SetHostReady", perHost: 2, fixed: 20,
		run: func(t *testing.T) int {
			s := fill(t, 1)
			ready := map[string]time.Time{}
			for i := range hosts {
				ready[host(i)] = now.Add(time.Minute)
			}
			return countCalls(t, s, &hqReadyScript, hqReadySrc, func() {
				if err := s.SetHostReady(ctx, ready); err != nil {
					t.Fatal(err)
				}
			})
		},
	}, {
		name: "Ack freeing hosts at their limit", perHost: 2, fixed: 30,
		run: func(t *testing.T) int {
			s := fill(t, 3)
			es, err := s.LeaseHosts(ctx, now, 2*hosts, 2, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			seen := map[string]bool{}
			for _, e := range es {
				if !seen[e.Host] {
					seen[e.Host] = true
					ids = append(ids, e.ID)
				}
			}
			return countCalls(t, s, &hqAckScript, hqAckSrc, func() {
				if err := s.Ack(ctx, ids...); err != nil {
					t.Fatal(err)
				}
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.run(t)
			t.Logf("%d commands for %d hosts", got, hosts)
			if most := tc.perHost*hosts + tc.fixed; got > most {
				t.Errorf("%d commands for %d hosts, want at most %d (%d per host + %d)", got, hosts, most, tc.perHost, tc.fixed)
			}
		})
	}
}

// checkHostLayout checks the host queue's sets against the hosts' sorted
// sets (see hqPrelude): a host with pending entries is in A at its head,
// and in exactly one of R (at its head), W and B; a host without is in
// none of A, R and B.
func checkHostLayout(t *testing.T, s *Store, hosts []string) {
	t.Helper()
	ctx := context.Background()
	members := func(key string) map[string]float64 {
		zs, err := s.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, z := range zs {
			m[z.Member.(string)] = z.Score
		}
		return m
	}
	a, r, w, b := members(s.key("hq:a")), members(s.key("hq:r")), members(s.key("hq:w")), members(s.key("hq:b"))
	wantA := 0
	for _, h := range hosts {
		hd, err := s.rdb.ZRangeWithScores(ctx, s.key("hq:h:"+h), 0, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, inW := w[h]
		_, inB := b[h]
		if len(hd) == 0 {
			if inB {
				t.Errorf("host %s has no entries and is in B", h)
			}
			for m := range r {
				if strings.HasSuffix(m, h) && len(m) == 20+len(h) {
					t.Errorf("host %s has no entries and is in R as %s", h, m)
				}
			}
			continue
		}
		wantA++
		mem := hd[0].Member.(string) + h
		if sc, ok := a[mem]; !ok || sc != hd[0].Score {
			t.Errorf("host %s: A has %s at %v (present %v), want at its head's score %v", h, mem, sc, ok, hd[0].Score)
		}
		sc, inR := r[mem]
		if inR && sc != hd[0].Score {
			t.Errorf("host %s: R has %s at %v, want %v", h, mem, sc, hd[0].Score)
		}
		if n := btoi(inR) + btoi(inW) + btoi(inB); n != 1 {
			t.Errorf("host %s with entries: in R %v, W %v, B %v; want exactly one", h, inR, inW, inB)
		}
	}
	if len(a) != wantA {
		t.Errorf("A has %d members, want %d (the hosts with entries)", len(a), wantA)
	}
	if len(r) > wantA {
		t.Errorf("R has %d members, more than the %d hosts with entries", len(r), wantA)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The batched moves between A, R, W and B keep the layout whatever mix
// of hosts a call touches: hosts new and known, heads that change and
// that do not, hosts ready, waiting and at their limit, hosts emptied.
func TestHostQueueLayoutKept(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{})
	ctx := t.Context()
	var hosts []string
	for i := range 12 {
		hosts = append(hosts, fmt.Sprintf("h%d:80", i))
	}
	now := time.Now()
	push := func(prio int, hs ...string) {
		t.Helper()
		var es []storage.HostEntry
		for _, h := range hs {
			es = append(es, storage.HostEntry{Host: h, Priority: prio, Data: []byte(h)})
		}
		if err := s.PushHosted(ctx, es...); err != nil {
			t.Fatal(err)
		}
		checkHostLayout(t, s, hosts)
	}
	push(0, hosts...)
	push(0, hosts[:6]...)
	// Hosts 0-3 wait, 4-5 are at their limit below.
	if err := s.SetHostReady(ctx, map[string]time.Time{hosts[0]: now.Add(time.Hour), hosts[1]: now.Add(time.Hour),
		hosts[2]: now.Add(time.Hour), hosts[3]: now.Add(time.Hour), hosts[11]: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	checkHostLayout(t, s, hosts)
	held, err := s.LeaseHosts(ctx, now, 100, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// 0-3 wait; 4 and 5 give 2 each, 6-11 one each.
	if len(held) != 10 {
		t.Fatalf("LeaseHosts() = %d entries %v, want 10", len(held), entryDatas(held))
	}
	checkHostLayout(t, s, hosts)
	// New heads for a waiting host, a host at its limit, an emptied host
	// and a new one; the same priority (no new head) for a waiting one.
	hosts = append(hosts, "new:80")
	push(3, hosts[0], hosts[4], hosts[7], "new:80")
	push(0, hosts[1])
	var ids []string
	for _, e := range held {
		ids = append(ids, e.ID)
	}
	// Frees 4 and 5 (at their limit) and ends 6-10's leases.
	if err := s.Ack(ctx, ids[:7]...); err != nil {
		t.Fatal(err)
	}
	checkHostLayout(t, s, hosts)
	ready := map[string]time.Time{}
	for _, e := range held[:7] {
		ready[e.Host] = now.Add(-time.Millisecond)
	}
	if err := s.SetHostReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	checkHostLayout(t, s, hosts)
	if err := s.Ack(ctx, ids[7:]...); err != nil {
		t.Fatal(err)
	}
	checkHostLayout(t, s, hosts)
	var got []string
	for {
		es, err := s.LeaseHosts(ctx, now.Add(2*time.Hour), 3, 2, time.Minute)
		if errors.Is(err, storage.ErrQueueEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		checkHostLayout(t, s, hosts)
		for _, e := range es {
			got = append(got, string(e.Data))
		}
		if err := s.Ack(ctx, leaseIDs(es)...); err != nil {
			t.Fatal(err)
		}
		checkHostLayout(t, s, hosts)
	}
	// What was left: 0-3's two first entries (they waited), 1's third, and
	// those of priority 3.
	want := []string{hosts[0], hosts[0], hosts[0], hosts[1], hosts[1], hosts[1], hosts[2], hosts[2], hosts[3], hosts[3], hosts[4], hosts[7], "new:80"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("leased after = %v, want %v", got, want)
	}
}

// mscore reads a sorted set's scores with ZMSCORE, and with one ZSCORE
// per member on a server without ZMSCORE (before 6.2): the same answer.
func TestHostQueueScoresWithoutZMSCORE(t *testing.T) {
	redisAddr(t)
	s := newTestStore(t, Options{})
	ctx := t.Context()
	if err := s.rdb.ZAdd(ctx, s.key("hq:b"), redis.Z{Score: 2, Member: "a"}, redis.Z{Score: 3, Member: "c"}).Err(); err != nil {
		t.Fatal(err)
	}
	body := hqPrelude + `return mscore(B, {'a', 'b', 'c'})`
	// A server before 6.2 answers ZMSCORE with an error.
	old := `local base = redis
local redis = setmetatable({pcall = function(cmd, ...)
	if cmd == 'ZMSCORE' then return {err = 'ERR unknown command'} end
	return base.pcall(cmd, ...)
end}, {__index = base})
local function body()
` + body + `
end
return body()`
	for name, src := range map[string]string{"ZMSCORE": body, "ZSCORE": old} {
		got, err := redis.NewScript(src).Run(ctx, s.rdb, s.hqKeys(), s.hqArgs(0)...).Slice()
		if want := []any{"2", nil, "3"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("mscore with %s = %v, %v; want %v", name, got, err, want)
		}
	}
}
