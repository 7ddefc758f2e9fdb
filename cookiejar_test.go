package magpie

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// failingCookies is an in-memory Storage whose CookieStore half fails, as a
// Redis store does during an outage.
type failingCookies struct {
	storage.InMemoryStorage
}

var errCookieStore = errors.New("cookie store down")

func (*failingCookies) GetCookies(context.Context, *url.URL) (string, error) {
	return "", errCookieStore
}
func (*failingCookies) PutCookies(context.Context, *url.URL, string) error { return errCookieStore }

// TestStorageJarReportsStoreErrors: http.CookieJar cannot return errors, so
// a failing cookie store must be logged, and the crawl must go on.
func TestStorageJarReportsStoreErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "1"})
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<p>ok</p>"))
	}))
	defer srv.Close()
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := NewCollector(IgnoreRobotsTxt(), Logger(logger))
	if err := c.SetStorage(&failingCookies{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v, want nil despite the cookie store", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"reading cookies", "storing cookies", errCookieStore.Error()} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs do not mention %q:\n%s", want, logs.String())
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
