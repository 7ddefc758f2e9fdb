module github.com/magpiecrawl/magpie/warc

go 1.26.0

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/klauspost/compress v1.20.3
	github.com/magpiecrawl/magpie v0.1.0
	github.com/nlnwa/gowarc/v3 v3.1.0
	golang.org/x/net v0.62.0
)
