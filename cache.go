package magpie

import (
	"net/http"
	"time"
)

// cachedResponse is what the file cache keeps of a response.
type cachedResponse struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	// URL is the final URL after redirects.
	URL string
}

// fileCache stores GET responses under dir, one file per key, written
// atomically (temporary file and rename). Entries older than expiration
// (0: never) are misses and are removed. Safe for concurrent use.
type fileCache struct {
	dir        string
	expiration time.Duration
}

// get returns the entry for key, if present and fresh.
func (fc *fileCache) get(key string) (*cachedResponse, bool) {
	return nil, false // STUB
}

// put stores cr under key. Only statuses below 400 are cached (Colly also
// caches 4xx, which then never recover).
func (fc *fileCache) put(key string, cr *cachedResponse) error {
	return nil // STUB
}
