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

require (
	github.com/PuerkitoBio/goquery v1.13.0 // indirect
	github.com/andybalholm/brotli v1.2.8 // indirect
	github.com/andybalholm/cascadia v1.3.4 // indirect
	github.com/antchfx/htmlquery v1.3.7 // indirect
	github.com/antchfx/xmlquery v1.5.2 // indirect
	github.com/antchfx/xpath v1.3.9 // indirect
	github.com/bits-and-blooms/bitset v1.24.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gobwas/glob v1.1.0 // indirect
	github.com/golang/groupcache v0.0.0-20210331224755-41bb18bfe9da // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/nlnwa/whatwg-url v0.6.2 // indirect
	github.com/temoto/robotstxt v1.1.2 // indirect
	golang.org/x/text v0.43.0 // indirect
)
