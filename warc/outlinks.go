package warc

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"golang.org/x/net/html"

	"github.com/magpiecrawl/magpie"
)

// Outlinks makes the Writer follow each HTML page's response record (2xx,
// text/html or application/xhtml+xml, body whole, content encoding gzip or
// none) with a metadata record of its links, one line each in Heritrix's
// form, "outlink: URL HOP TAG/@ATTR" (HOP L: a link; E: an embed, such as
// an image, script or stylesheet), linked to the response by
// WARC-Concurrent-To. Off by default: it parses every page once more.
func Outlinks() Option { return func(o *options) { o.outlinks = true } }

// maxOutlinkBody bounds the decoded bytes of a page read for its links.
const maxOutlinkBody = 16 << 20

// linkAttrs names, by tag, the attribute that holds a link and its hop.
var linkAttrs = map[string]struct{ attr, hop string }{
	"a": {"href", "L"}, "area": {"href", "L"}, "form": {"action", "L"},
	"frame": {"src", "L"}, "iframe": {"src", "L"},
	"link": {"href", "E"}, "img": {"src", "E"}, "script": {"src", "E"},
	"embed": {"src", "E"}, "source": {"src", "E"}, "audio": {"src", "E"},
	"video": {"src", "E"}, "track": {"src", "E"},
}

func isHTML(mime string) bool { return mime == "text/html" || mime == "application/xhtml+xml" }

// pageLinks reads the recorded response as a client would (framing and
// gzip undone) and returns its outlink lines, absolute http(s) URLs
// resolved against target (or the page's <base href>), each once.
func pageLinks(br *bufio.Reader, b *magpie.WireBytes, req *http.Request, target string) []string {
	br.Reset(b.NewReader())
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var body io.Reader = res.Body
	switch strings.ToLower(res.Header.Get("Content-Encoding")) {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil
		}
		defer zr.Close()
		body = zr
	default:
		return nil // an encoding this package does not decode
	}
	base, err := url.Parse(target)
	if err != nil {
		return nil
	}
	var lines []string
	seen := make(map[string]bool)
	baseSet := false
	z := html.NewTokenizer(io.LimitReader(body, maxOutlinkBody))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return lines
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			tag := string(name)
			want, ok := linkAttrs[tag]
			if tag == "base" {
				want, ok = struct{ attr, hop string }{"href", ""}, !baseSet
			}
			for ok && more {
				var k, v []byte
				k, v, more = z.TagAttr()
				if string(k) != want.attr {
					continue
				}
				u, err := base.Parse(strings.TrimSpace(string(v)))
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
					break
				}
				u.Fragment, u.RawFragment = "", ""
				if tag == "base" {
					base, baseSet = u, true
					break
				}
				line := fmt.Sprintf("outlink: %s %s %s/@%s\r\n", u, want.hop, tag, want.attr)
				if !seen[line] {
					seen[line] = true
					lines = append(lines, line)
				}
				break
			}
		}
	}
}

// metadataRecord builds the metadata record of a page's outlink lines,
// concurrent to its response record id.
func (w *Writer) metadataRecord(lines []string, target, id string, date time.Time) (gowarc.WarcRecord, error) {
	rb := newBuilder(gowarc.Metadata, w.recOpts)
	for _, l := range lines {
		if _, err := rb.WriteString(l); err != nil {
			_ = rb.Close()
			return nil, fmt.Errorf("warc: buffering metadata record: %w", err)
		}
	}
	rb.AddWarcHeader(gowarc.WarcTargetURI, target)
	rb.AddWarcHeaderTime(gowarc.WarcDate, date)
	rb.AddWarcHeader(gowarc.ContentType, gowarc.ApplicationWarcFields)
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("warc: building metadata record for %s: %w", target, err)
	}
	rec.WarcHeader().SetId(gowarc.WarcConcurrentTo, id)
	return rec, nil
}
