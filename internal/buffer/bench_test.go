package buffer

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

const benchBatch = 1024 // items moved per benchmark iteration

// benchPair moves benchBatch items per iteration from producers to consumers
// through put and get. The producer and consumer goroutines live for the
// whole benchmark; each iteration hands them a share of the batch.
func benchPair(b *testing.B, producers, consumers int, put func(int), get func()) {
	b.Helper()
	var wg, batch sync.WaitGroup
	prodGo := make([]chan int, producers)
	consGo := make([]chan int, consumers)
	for i := range prodGo {
		prodGo[i] = make(chan int)
		wg.Go(func() {
			for k := range prodGo[i] {
				for j := range k {
					put(j)
				}
				batch.Done()
			}
		})
	}
	for i := range consGo {
		consGo[i] = make(chan int)
		wg.Go(func() {
			for k := range consGo[i] {
				for range k {
					get()
				}
				batch.Done()
			}
		})
	}
	for b.Loop() {
		batch.Add(producers + consumers)
		for i, ch := range prodGo {
			ch <- share(benchBatch, producers, i)
		}
		for i, ch := range consGo {
			ch <- share(benchBatch, consumers, i)
		}
		batch.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/item")
	for _, ch := range prodGo {
		close(ch)
	}
	for _, ch := range consGo {
		close(ch)
	}
	wg.Wait()
}

// share is worker i's part of n split among k workers.
func share(n, k, i int) int {
	s := n / k
	if i < n%k {
		s++
	}
	return s
}

// BenchmarkPutGet compares Pool Put+Get with a plain buffered channel of the
// same total capacity.
func BenchmarkPutGet(b *testing.B) {
	const bufCap, maxBuf = 64, 4
	for _, pc := range [][2]int{{1, 1}, {4, 4}} {
		name := fmt.Sprintf("%dx%d", pc[0], pc[1])
		b.Run("pool/"+name, func(b *testing.B) {
			p, _ := NewPool[int](bufCap, maxBuf)
			ctx := context.Background()
			benchPair(b, pc[0], pc[1],
				func(v int) { _ = p.Put(ctx, v) },
				func() { _, _ = p.Get(ctx) })
			p.Close()
		})
		b.Run("chan/"+name, func(b *testing.B) {
			ch := make(chan int, bufCap*maxBuf)
			benchPair(b, pc[0], pc[1],
				func(v int) { ch <- v },
				func() { <-ch })
		})
	}
}
