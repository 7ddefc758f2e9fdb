package magpie

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
//
// A key is a lowercase hex string of at least three characters (cacheKey
// makes them); key "abcdef…" lives in dir/ab/abcdef…. A file starts with
// cacheMagic, whose version number changes whenever the encoding does, so an
// old or foreign file is a miss (and is removed), never a misread. Any file
// that does not decode is treated the same way. Files are created mode 0600
// (cached pages may hold a logged-in user's data); directories 0755.
type fileCache struct {
	dir        string
	expiration time.Duration
}

// cacheMagic starts every cache file; bump the version when cacheEntry or
// cachedResponse change shape.
const cacheMagic = "magpie-cache v1\n"

// cacheEntry is the gob-encoded body of a cache file.
type cacheEntry struct {
	// Written is when put stored the entry; expiration counts from it, not
	// from the file's mtime, which copies and backups change.
	Written  time.Time
	Response cachedResponse
}

// errBadCacheKey is returned by put for a key that cacheKey cannot have made.
var errBadCacheKey = errors.New("magpie: invalid cache key")

// cacheKey returns the cache key of a request: the hex SHA-1 of method and
// canonical URL. Unlike Colly's (SHA-1 of the raw URL) it tells a GET from a
// HEAD, and fragments or default ports do not split one page into two.
func cacheKey(method, canonicalURL string) string {
	h := sha1.New()
	io.WriteString(h, method)
	h.Write([]byte{0})
	io.WriteString(h, canonicalURL)
	return hex.EncodeToString(h.Sum(nil))
}

// path returns the file of key, or false if key is not lowercase hex of at
// least three characters (so a key can never name a file outside dir).
func (fc *fileCache) path(key string) (string, bool) {
	if len(key) < 3 {
		return "", false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return filepath.Join(fc.dir, key[:2], key), true
}

// get returns the entry for key, if present and fresh.
func (fc *fileCache) get(key string) (*cachedResponse, bool) {
	p, ok := fc.path(key)
	if !ok {
		return nil, false
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, false
	}
	e, err := decodeCacheEntry(bufio.NewReader(f))
	if err != nil || fc.expiration > 0 && time.Since(e.Written) > fc.expiration {
		fc.remove(p, info)
		return nil, false
	}
	return &e.Response, true
}

// remove deletes p if it is still the file described by info, so that a miss
// never deletes an entry that a concurrent put has just renamed into place.
func (fc *fileCache) remove(p string, info os.FileInfo) {
	if now, err := os.Stat(p); err == nil && os.SameFile(info, now) {
		os.Remove(p)
	}
}

// decodeCacheEntry reads one cache file. gob reports malformed input as an
// error; the recover is a second line of defence, because a cache file is
// input from disk and no panic may escape the library.
func decodeCacheEntry(r io.Reader) (e cacheEntry, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("magpie: corrupt cache file: %v", p)
		}
	}()
	magic := make([]byte, len(cacheMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != cacheMagic {
		return e, fmt.Errorf("magpie: not a %q cache file", cacheMagic[:len(cacheMagic)-1])
	}
	if err := gob.NewDecoder(r).Decode(&e); err != nil {
		return e, fmt.Errorf("magpie: corrupt cache file: %w", err)
	}
	return e, nil
}

// put stores cr under key. Only statuses below 400 are cached (Colly also
// caches 4xx, which then never recover).
func (fc *fileCache) put(key string, cr *cachedResponse) error {
	if cr == nil || cr.StatusCode >= 400 {
		return nil
	}
	p, ok := fc.path(key)
	if !ok {
		return fmt.Errorf("%w: %q", errBadCacheKey, key)
	}
	var buf bytes.Buffer
	buf.Grow(len(cacheMagic) + len(cr.Body) + 512)
	buf.WriteString(cacheMagic)
	if err := gob.NewEncoder(&buf).Encode(cacheEntry{Written: time.Now(), Response: *cr}); err != nil {
		return fmt.Errorf("magpie: encoding cache entry: %w", err)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("magpie: cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+key+".tmp*")
	if err != nil {
		return fmt.Errorf("magpie: cache: %w", err)
	}
	_, werr := tmp.Write(buf.Bytes())
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("magpie: cache: writing %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("magpie: cache: %w", err)
	}
	return nil
}
