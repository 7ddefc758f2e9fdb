// Command hostbytes measures the state a host-aware queue keeps per host
// (issue 39: "per-host state stays linear, and the table gives its bytes per
// host in each store"): it pushes entries for -hosts hosts into each store
// through storage.HostQueue (PushHosted, then SetHostReady for every host)
// and prints a markdown table of bytes per host.
//
// Each store is filled twice, each time fresh: with one entry for each of
// the hosts (hosts × 1), and with as many entries for a single host
// (1 × hosts). The first costs entries and hosts, the second entries and one
// host, so their difference ÷ hosts is what a host costs beyond its
// entries. Bytes are, for the in-memory queue (storage.NewMemoryQueue), the
// live heap (runtime.MemStats.HeapAlloc after a GC) before and after; for
// sqlitestore, the database file (and its WAL, if any) after Close against
// the same for an empty store; for redisstore, the server's used_memory
// (INFO memory) before and after, under a key prefix of its own, cleared
// after: run it against a Redis no one else writes to.
//
// A store that does not implement storage.HostQueue is reported as such,
// not measured.
//
//	hostbytes [-hosts 10000] [-stores mem,sqlite,redis] [-redis 127.0.0.1:6379] [-payload 100]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// errNoHostQueue is returned for a store that does not implement
// storage.HostQueue.
var errNoHostQueue = errors.New("does not implement storage.HostQueue")

// batch is how many entries one PushHosted (and hosts one SetHostReady)
// carries.
const batch = 1000

// fill pushes n entries of payload bytes into q (a storage.HostQueue, else
// errNoHostQueue), each under host(i), and sets every host's next allowed
// start an hour ahead, so that no host is forgotten as idle.
func fill(ctx context.Context, q storage.Queue, n, payload int, host func(i int) string) error {
	hq, ok := q.(storage.HostQueue)
	if !ok {
		return fmt.Errorf("%T %w", q, errNoHostQueue)
	}
	data := make([]byte, payload)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	ready := time.Now().Add(time.Hour)
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		entries := make([]storage.HostEntry, 0, end-start)
		hosts := make(map[string]time.Time, end-start)
		for i := start; i < end; i++ {
			h := host(i)
			entries = append(entries, storage.HostEntry{Host: h, Data: data})
			hosts[h] = ready
		}
		if err := hq.PushHosted(ctx, entries...); err != nil {
			return fmt.Errorf("PushHosted: %w", err)
		}
		if err := hq.SetHostReady(ctx, hosts); err != nil {
			return fmt.Errorf("SetHostReady: %w", err)
		}
	}
	return nil
}

// manyHosts names entry i's host in the hosts × 1 fill, oneHost in the
// 1 × hosts one: names as long as a broad crawl's.
func manyHosts(i int) string { return "www.host" + strconv.Itoa(i) + ".example.com:80" }
func oneHost(int) string     { return "www.host0.example.com:80" }

// store is one store to measure: bytes fills a fresh, empty one with fill
// and returns how many bytes the filling added.
type store struct {
	name, how string
	bytes     func(ctx context.Context, fill func(storage.Queue) error) (int64, error)
}

// memStore measures storage.NewMemoryQueue by the live heap.
func memStore() store {
	return store{name: "memory (storage.MemoryQueue)", how: "heap (HeapAlloc after a GC)",
		bytes: func(_ context.Context, fill func(storage.Queue) error) (int64, error) {
			before := liveHeap()
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			if err := fill(q); err != nil {
				return 0, err
			}
			after := liveHeap()
			runtime.KeepAlive(q)
			return after - before, nil
		}}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// sqliteStore measures sqlitestore by its files, in a new directory each
// time.
func sqliteStore() store {
	return store{name: "sqlitestore", how: "database file + WAL after Close, less an empty store's",
		bytes: func(_ context.Context, fill func(storage.Queue) error) (int64, error) {
			dir, err := os.MkdirTemp("", "magpie-hostbytes-")
			if err != nil {
				return 0, err
			}
			defer os.RemoveAll(dir)
			path := filepath.Join(dir, "crawl.db")
			open := func() (*sqlitestore.Store, error) { return sqlitestore.Open(path) }
			st, err := open()
			if err != nil {
				return 0, err
			}
			if err := st.Close(); err != nil {
				return 0, err
			}
			before, err := filesSize(path, path+"-wal")
			if err != nil {
				return 0, err
			}
			if st, err = open(); err != nil {
				return 0, err
			}
			ferr := fill(st)
			if err := errors.Join(ferr, st.Close()); err != nil {
				return 0, err
			}
			after, err := filesSize(path, path+"-wal")
			return after - before, err
		}}
}

// filesSize sums the sizes of the files that exist among paths.
func filesSize(paths ...string) (int64, error) {
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// redisStore measures redisstore at addr by the server's used_memory.
func redisStore(addr string) store {
	return store{name: "redisstore", how: "used_memory (INFO memory) of the server",
		bytes: func(ctx context.Context, fill func(storage.Queue) error) (int64, error) {
			prefix := "magpie-hostbytes-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			st, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: prefix})
			if err != nil {
				return 0, err
			}
			defer st.Close()
			defer func() { _ = st.Clear(context.WithoutCancel(ctx)) }()
			if err := st.Clear(ctx); err != nil {
				return 0, err
			}
			before, err := usedMemory(ctx, addr)
			if err != nil {
				return 0, err
			}
			if err := fill(st); err != nil {
				return 0, err
			}
			after, err := usedMemory(ctx, addr)
			return after - before, err
		}}
}

// usedMemory asks the Redis server at addr for INFO memory's used_memory,
// over a connection of its own (RESP, no client library needed).
func usedMemory(ctx context.Context, addr string) (int64, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n"); err != nil {
		return 0, err
	}
	return parseUsedMemory(bufio.NewReader(conn))
}

// parseUsedMemory reads an INFO reply (a bulk string) and returns its
// used_memory field.
func parseUsedMemory(r *bufio.Reader) (int64, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO memory: reply %q", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("INFO memory: reply %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory: no used_memory")
}

// result is one store's figures.
type result struct {
	manyHosts, oneHost int64 // bytes the hosts × 1 and 1 × hosts fills added
	err                error
}

// measure fills s both ways with hosts entries of payload bytes.
func measure(ctx context.Context, s store, hosts, payload int) result {
	var res result
	res.manyHosts, res.err = s.bytes(ctx, func(q storage.Queue) error { return fill(ctx, q, hosts, payload, manyHosts) })
	if res.err != nil {
		return res
	}
	res.oneHost, res.err = s.bytes(ctx, func(q storage.Queue) error { return fill(ctx, q, hosts, payload, oneHost) })
	return res
}

// writeTable writes the results as a markdown table.
func writeTable(w io.Writer, hosts, payload int, stores []store, results []result) {
	fmt.Fprintf(w, "| store | bytes per host, %d hosts × 1 entry | bytes per entry, 1 host × %d entries | bytes per host beyond its entries | measured by |\n", hosts, hosts)
	fmt.Fprintln(w, "|---|--:|--:|--:|---|")
	for i, s := range stores {
		r := results[i]
		if r.err != nil {
			fmt.Fprintf(w, "| %s | not measured: %v | | | %s |\n", s.name, r.err, s.how)
			continue
		}
		per := func(b int64) string { return strconv.FormatFloat(float64(b)/float64(hosts), 'f', 0, 64) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s.name, per(r.manyHosts), per(r.oneHost), per(r.manyHosts-r.oneHost), s.how)
	}
	fmt.Fprintf(w, "\nEntries of %d bytes of payload; every host's next allowed start set (SetHostReady) an hour ahead.\n", payload)
}

func main() {
	hosts := flag.Int("hosts", 10000, "hosts (and entries) per fill")
	which := flag.String("stores", "mem,sqlite,redis", "stores to measure: mem, sqlite, redis")
	addr := flag.String("redis", "127.0.0.1:6379", "redis: the server's address (one no one else writes to)")
	payload := flag.Int("payload", 100, "bytes of each entry's payload")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if *hosts < 1 || *payload < 0 {
		fmt.Fprintln(os.Stderr, "hostbytes: -hosts must be at least 1 and -payload not negative")
		os.Exit(2)
	}
	var stores []store
	for _, name := range strings.Split(*which, ",") {
		switch strings.TrimSpace(name) {
		case "mem":
			stores = append(stores, memStore())
		case "sqlite":
			stores = append(stores, sqliteStore())
		case "redis":
			stores = append(stores, redisStore(*addr))
		default:
			fmt.Fprintf(os.Stderr, "hostbytes: unknown store %q (want mem, sqlite or redis)\n", name)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	results := make([]result, len(stores))
	failed := false
	for i, s := range stores {
		results[i] = measure(ctx, s, *hosts, *payload)
		if err := results[i].err; err != nil && !errors.Is(err, errNoHostQueue) {
			failed = true
		}
		if err := results[i].err; errors.Is(err, errNoHostQueue) {
			fmt.Fprintf(os.Stderr, "hostbytes: %s %v: not measured\n", s.name, errNoHostQueue)
		}
	}
	writeTable(os.Stdout, *hosts, *payload, stores, results)
	if failed {
		os.Exit(1)
	}
}
