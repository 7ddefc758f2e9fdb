// Package warc writes the HTTP exchanges of a magpie crawl to WARC/1.1
// files (ISO 28500) that web-archiving tools index and replay:
//
//	w, err := warc.New("archive", warc.Prefix("shop"))
//	if err != nil {
//		return err
//	}
//	defer w.Close()
//	c := magpie.NewCollector(w.Option())
//	err = c.Visit("https://example.com/")
//
// Each file opens with a warcinfo record; each exchange (pages, redirect
// hops, error statuses, robots.txt) is a response record with the bytes as
// read off the connection (status line, headers, body with its transfer
// and content encodings) and a request record with the bytes as written,
// linked by WARC-Concurrent-To and carrying WARC-Target-URI, WARC-Date,
// WARC-IP-Address, WARC-Block-Digest and WARC-Payload-Digest (sha1, base32;
// the payload is the body with its chunked framing taken off and its content
// encoding kept, as WARC 1.1 defines it).
// A 304 becomes a revisit record (profile server-not-modified) that names
// the record of the page's last full answer and carries its payload digest
// when a recrawl's page state knows it (the Writer reports the record of
// each whole 2xx answer in magpie.WireExchange.Archived; magpie.Recrawl
// keeps it and hands it back as WireExchange.Original), and so does
// a 2xx body identical to one already archived by the Writer (profile
// identical-payload-digest, referring to the first capture; the Writer
// remembers each distinct body in about 25 bytes of memory and keeps the
// rest of what a revisit refers to in an unlinked temporary file). A body cut by
// MaxBodySize is marked WARC-Truncated: length. With Outlinks, each HTML
// page's response is followed by a metadata record of its links.
//
// Files are gzip-compressed record by record (gzip's fastest level), named
// prefix-YYYYMMDDhhmmss-NNNNN.warc.gz, and rotated past MaxFileSize. A file
// is written as name.warc.gz.open and renamed when closed, with its CDXJ
// index (pywb's format) beside it as name.cdxj; a request other than a GET
// is keyed there with its method and body in the query
// (…/form?__wb_method=post&a=1&b=two), as pywb and warcio key it. New
// recovers a file a killed crawl left open (name.warc.gz.open, with its
// unsorted index lines in name.cdxj.open): it keeps every whole record,
// renames the file and indexes it from the lines of the records it kept;
// the new run writes a new file.
//
// Request and response records are written straight from the recorded
// bytes, with the digests computed as they were read once; the others
// (warcinfo, revisit, resource, metadata) are built with
// github.com/nlnwa/gowarc/v3, which is why this is a module of its own: a
// program that does not archive does not build it.
package warc
