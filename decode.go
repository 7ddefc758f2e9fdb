package magpie

import (
	"io"
	"net/http"
)

// acceptEncoding is sent on every request unless the caller set its own, so
// that servers may compress with anything readBody understands.
const acceptEncoding = "gzip" // STUB: becomes "gzip, deflate, br, zstd" once readBody decodes them

// readBody reads a response body as sent, undoes its Content-Encoding (gzip,
// deflate, br, zstd; gzip also when sniffed by magic bytes as Colly does for
// *.xml.gz and gzip content types), and stops after max bytes of decoded output
// (max <= 0: no limit). truncated reports that more decoded bytes were
// available than max. The caller closes r.
func readBody(r io.Reader, header http.Header, urlPath string, max int64) (body []byte, truncated bool, err error) {
	// STUB: replaced by the decoding implementation.
	if max <= 0 {
		b, err := io.ReadAll(r)
		return b, false, err
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		return b[:max], true, err
	}
	return b, false, err
}

// toUTF8 converts a text body to UTF-8. The source charset is, in order:
// forced (Request.ResponseCharacterEncoding), the Content-Type header's
// charset, a byte-order mark, <meta charset> or <meta http-equiv> in the first
// 1024 bytes of HTML, and, only when detect is true, a guess from the content.
// Bodies that are not text (image, audio, video, font) are returned unchanged.
func toUTF8(body []byte, contentType string, forced string, detect bool) ([]byte, error) {
	// STUB: replaced by the charset implementation.
	return body, nil
}
