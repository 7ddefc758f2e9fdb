package storage

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

// InMemoryStorage is the default Storage: a visited set and a cookie jar in
// memory, lost when the process ends. Its zero value is ready after Init.
// Safe for concurrent use. It implements VisitedSet and CookieStore.
type InMemoryStorage struct {
	// mu guards visited and jar.
	mu      sync.Mutex
	visited map[uint64]struct{}
	jar     *cookiejar.Jar
}

// Init prepares the maps; calling it again keeps what is stored.
func (s *InMemoryStorage) Init() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.visited == nil {
		s.visited = make(map[uint64]struct{})
	}
	if s.jar == nil {
		j, err := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
		if err != nil {
			return err
		}
		s.jar = j
	}
	return nil
}

// Visited marks requestID visited.
func (s *InMemoryStorage) Visited(requestID uint64) error {
	_, err := s.AddVisited(context.Background(), requestID)
	return err
}

// IsVisited reports whether requestID is visited.
func (s *InMemoryStorage) IsVisited(requestID uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.visited[requestID]
	return ok, nil
}

// AddVisited implements VisitedSet.
func (s *InMemoryStorage) AddVisited(_ context.Context, ids ...uint64) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.visited == nil {
		s.visited = make(map[uint64]struct{})
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		if _, ok := s.visited[id]; !ok {
			s.visited[id] = struct{}{}
			out[i] = true
		}
	}
	return out, nil
}

// RemoveVisited implements VisitedSet.
func (s *InMemoryStorage) RemoveVisited(_ context.Context, ids ...uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.visited, id)
	}
	return nil
}

// Cookies returns the cookies for u as newline-joined Set-Cookie strings.
func (s *InMemoryStorage) Cookies(u *url.URL) string {
	c, _ := s.GetCookies(context.Background(), u)
	return c
}

// SetCookies stores newline-joined Set-Cookie strings received from u.
func (s *InMemoryStorage) SetCookies(u *url.URL, cookies string) {
	_ = s.PutCookies(context.Background(), u, cookies)
}

// GetCookies implements CookieStore.
func (s *InMemoryStorage) GetCookies(_ context.Context, u *url.URL) (string, error) {
	if err := s.Init(); err != nil {
		return "", err
	}
	var b strings.Builder
	for i, c := range s.jar.Cookies(u) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.String())
	}
	return b.String(), nil
}

// PutCookies implements CookieStore.
func (s *InMemoryStorage) PutCookies(_ context.Context, u *url.URL, cookies string) error {
	if err := s.Init(); err != nil {
		return err
	}
	var parsed []*http.Cookie
	for line := range strings.SplitSeq(cookies, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if c, err := http.ParseSetCookie(line); err == nil {
			parsed = append(parsed, c)
		}
	}
	s.jar.SetCookies(u, parsed)
	return nil
}

// Close releases nothing; it exists for symmetry with durable stores.
func (s *InMemoryStorage) Close() error { return nil }
