package feed_test

import (
	"path/filepath"
	"testing"

	"github.com/magpiecrawl/magpie/feed"
)

// BenchmarkCreateJSONLines measures one item written to a file, one write
// call each (the cost of crash safety), with and without an fsync per item.
func BenchmarkCreateJSONLines(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []feed.Option
	}{{"write", nil}, {"append", []feed.Option{feed.Append()}}, {"durable", []feed.Option{feed.Durable()}}} {
		b.Run(tc.name, func(b *testing.B) {
			e, err := feed.Create(filepath.Join(b.TempDir(), "items.jsonl"), tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := e.Write(products[1]); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
