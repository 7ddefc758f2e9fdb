package redisstore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinelConformance runs the conformance suite on a Store given a
// Sentinel client (redis.FailoverClient), with a master, its replica and
// one sentinel the test starts on free loopback ports.
func TestSentinelConformance(t *testing.T) {
	redisAddr(t) // runs where the Redis tests run; the servers are its own
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server required in CI: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	dir := t.TempDir()
	ports := freeClusterPorts(t, 3)
	master, replica, sentinel := strconv.Itoa(ports[0]), strconv.Itoa(ports[1]), strconv.Itoa(ports[2])
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte("port "+sentinel+"\nbind 127.0.0.1\nsentinel monitor crawl 127.0.0.1 "+master+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--bind", "127.0.0.1", "--port", master, "--save", "", "--appendonly", "no", "--dir", dir},
		{"--bind", "127.0.0.1", "--port", replica, "--save", "", "--appendonly", "no", "--dir", dir, "--replicaof", "127.0.0.1", master},
		{conf, "--sentinel"},
	} {
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "crawl", SentinelAddrs: []string{"127.0.0.1:" + sentinel}, MaxRetries: -1,
	})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	if !eventually(t, 30*time.Second, func() bool {
		info, err := rdb.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	}) {
		t.Fatal("the master was not reachable through the sentinel")
	}
	runConformance(t, func(t testing.TB, opts Options) *Store {
		if opts.Prefix == "" {
			opts.Prefix = randomPrefix()
		}
		s, err := NewFromClient(rdb, opts)
		if err != nil {
			t.Fatalf("NewFromClient(sentinel client) error = %v", err)
		}
		t.Cleanup(func() {
			c, err := NewFromClient(rdb, Options{Prefix: opts.Prefix})
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			if err := c.Clear(context.Background()); err != nil {
				t.Errorf("cleanup Clear() error = %v", err)
			}
			c.Close()
			s.Close()
		})
		return s
	})
}
