package magpie

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestCacheKey(t *testing.T) {
	k := cacheKey("GET", "http://example.com/")
	if len(k) != 40 {
		t.Errorf("cacheKey() = %q, want 40 hex characters", k)
	}
	if k != cacheKey("GET", "http://example.com/") {
		t.Errorf("cacheKey() is not deterministic")
	}
	if k == cacheKey("HEAD", "http://example.com/") || k == cacheKey("GET", "http://example.com/a") {
		t.Errorf("cacheKey() does not separate method and URL")
	}
	if cacheKey("GE", "Thttp://h/") == cacheKey("GET", "http://h/") {
		t.Errorf("cacheKey() is ambiguous between method and URL")
	}
}

func TestCachePutGet(t *testing.T) {
	fc := &fileCache{dir: t.TempDir()}
	want := &cachedResponse{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/html"}, "X-Multi": {"a", "b"}},
		Body:       []byte("<p>hello</p>"),
		URL:        "http://example.com/final",
	}
	key := cacheKey("GET", "http://example.com/")
	if _, ok := fc.get(key); ok {
		t.Fatalf("get() on empty cache hit")
	}
	if err := fc.put(key, want); err != nil {
		t.Fatalf("put() error = %v", err)
	}
	if _, err := os.Stat(filepath.Join(fc.dir, key[:2], key)); err != nil {
		t.Errorf("cache file not at dir/%s/%s: %v", key[:2], key, err)
	}
	got, ok := fc.get(key)
	if !ok {
		t.Fatalf("get() after put missed")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("get() = %+v, want %+v", got, want)
	}
	// Overwrite replaces.
	want2 := &cachedResponse{StatusCode: 301, Body: []byte("moved")}
	if err := fc.put(key, want2); err != nil {
		t.Fatalf("put() error = %v", err)
	}
	if got, _ := fc.get(key); got == nil || string(got.Body) != "moved" {
		t.Errorf("get() after overwrite = %+v, want body %q", got, "moved")
	}
	entries, _ := os.ReadDir(filepath.Join(fc.dir, key[:2]))
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d files after two puts, want 1 (temporary files left behind?)", len(entries))
	}
}

func TestCacheOnlyBelow400(t *testing.T) {
	for _, status := range []int{200, 204, 301, 304, 399, 400, 403, 404, 429, 500, 503} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			fc := &fileCache{dir: t.TempDir()}
			key := cacheKey("GET", "http://h/"+strconv.Itoa(status))
			if err := fc.put(key, &cachedResponse{StatusCode: status}); err != nil {
				t.Fatalf("put(%d) error = %v", status, err)
			}
			if _, ok := fc.get(key); ok != (status < 400) {
				t.Errorf("get() after put(status %d) hit = %v, want %v", status, ok, status < 400)
			}
		})
	}
}

func TestCacheCorruptIsMissAndRemoved(t *testing.T) {
	key := cacheKey("GET", "http://h/")
	tests := []struct {
		name    string
		content []byte
	}{
		{"empty", nil},
		{"garbage", []byte("\x00\xff not a cache file at all")},
		{"old version", []byte("magpie-cache v0\n...")},
		{"magic then garbage", []byte(cacheMagic + "\x05\x07\xff\xff\xff\xff\xff\xff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fileCache{dir: t.TempDir()}
			p, _ := fc.path(key)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, ok := fc.get(key); ok {
				t.Errorf("get(corrupt) = %+v, true; want miss", got)
			}
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("corrupt cache file still present (stat error %v)", err)
			}
		})
	}
	t.Run("truncated valid file", func(t *testing.T) {
		fc := &fileCache{dir: t.TempDir()}
		fc.put(key, &cachedResponse{StatusCode: 200, Body: bytes.Repeat([]byte("x"), 1000)})
		p, _ := fc.path(key)
		b, _ := os.ReadFile(p)
		os.WriteFile(p, b[:len(b)/2], 0o644)
		if _, ok := fc.get(key); ok {
			t.Errorf("get(truncated file) hit, want miss")
		}
	})
}

func TestCacheBadKey(t *testing.T) {
	fc := &fileCache{dir: t.TempDir()}
	for _, key := range []string{"", "ab", "../../etc/passwd", "ABCDEF", "abc/def", "zz00"} {
		if err := fc.put(key, &cachedResponse{StatusCode: 200}); !errors.Is(err, errBadCacheKey) {
			t.Errorf("put(%q) error = %v, want %v", key, err, errBadCacheKey)
		}
		if _, ok := fc.get(key); ok {
			t.Errorf("get(%q) hit, want miss", key)
		}
	}
}

func TestCacheExpiration(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		fc := &fileCache{dir: dir, expiration: time.Hour}
		never := &fileCache{dir: dir}
		key := cacheKey("GET", "http://h/")
		if err := fc.put(key, &cachedResponse{StatusCode: 200, Body: []byte("x")}); err != nil {
			t.Fatalf("put() error = %v", err)
		}
		time.Sleep(59 * time.Minute)
		if _, ok := fc.get(key); !ok {
			t.Fatalf("get() after 59m missed, want hit (expiration 1h)")
		}
		time.Sleep(2 * time.Minute)
		if _, ok := never.get(key); !ok {
			t.Fatalf("get() with expiration 0 after 61m missed, want hit")
		}
		if _, ok := fc.get(key); ok {
			t.Fatalf("get() after 61m hit, want miss (expiration 1h)")
		}
		if _, ok := never.get(key); ok {
			t.Errorf("expired entry was not removed")
		}
	})
}

func TestCacheConcurrent(t *testing.T) {
	fc := &fileCache{dir: t.TempDir(), expiration: time.Hour}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := cacheKey("GET", "http://h/"+strconv.Itoa(i%5))
				body := []byte("body-" + strconv.Itoa(i%5))
				if w%2 == 0 {
					if err := fc.put(key, &cachedResponse{StatusCode: 200, Body: body}); err != nil {
						t.Errorf("put() error = %v", err)
					}
				} else if got, ok := fc.get(key); ok && !bytes.Equal(got.Body, body) {
					t.Errorf("get() = %q, want %q (torn write?)", got.Body, body)
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkCache(b *testing.B) {
	fc := &fileCache{dir: b.TempDir()}
	cr := &cachedResponse{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: benchmarkPage()}
	key := cacheKey("GET", "http://h/")
	b.Run("put", func(b *testing.B) {
		for b.Loop() {
			if err := fc.put(key, cr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, ok := fc.get(key); !ok {
				b.Fatal("miss")
			}
		}
	})
}
