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
// memory, lost when the process ends. Its zero value is ready to use (Init is
// optional). Safe for concurrent use. It implements VisitedSet, PageStore
// and CookieStore. After Close every method fails with ErrClosed (Colly's
// Storage methods that cannot return an error report nothing and store
// nothing).
type InMemoryStorage struct {
	// mu guards visited, pages, jar and closed.
	mu      sync.Mutex
	visited map[uint64]struct{}
	pages   map[uint64]string // encoded PageStates; see memory_pages.go
	jar     *cookiejar.Jar
	closed  bool
}

// Init prepares the maps; calling it again keeps what is stored.
func (s *InMemoryStorage) Init() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initLocked()
}

func (s *InMemoryStorage) initLocked() error {
	if s.closed {
		return ErrClosed
	}
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
	if s.closed {
		return false, ErrClosed
	}
	_, ok := s.visited[requestID]
	return ok, nil
}

// AddVisited implements VisitedSet.
func (s *InMemoryStorage) AddVisited(ctx context.Context, ids ...uint64) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.initLocked(); err != nil {
		return nil, err
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
func (s *InMemoryStorage) RemoveVisited(ctx context.Context, ids ...uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
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
func (s *InMemoryStorage) GetCookies(ctx context.Context, u *url.URL) (string, error) {
	jar, err := s.cookieJar(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, c := range jar.Cookies(u) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.String())
	}
	return b.String(), nil
}

// PutCookies implements CookieStore. Lines that do not parse as Set-Cookie
// values are skipped, as a browser would.
func (s *InMemoryStorage) PutCookies(ctx context.Context, u *url.URL, cookies string) error {
	jar, err := s.cookieJar(ctx)
	if err != nil {
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
	jar.SetCookies(u, parsed)
	return nil
}

// cookieJar returns the jar; the jar is itself safe for concurrent use, so
// it is used outside mu.
func (s *InMemoryStorage) cookieJar(ctx context.Context) (*cookiejar.Jar, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.initLocked(); err != nil {
		return nil, err
	}
	return s.jar, nil
}

// Close drops what is stored; later calls fail with ErrClosed. Closing twice
// returns ErrClosed.
func (s *InMemoryStorage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	s.visited, s.pages, s.jar = nil, nil, nil
	return nil
}
