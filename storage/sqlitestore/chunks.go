package sqlitestore

import (
	"fmt"
	"strings"
)

// chunkSizes are the row counts of the multi-row statements that Open
// prepares, largest first: k rows take one statement per 64 and one per
// set bit of the rest. A statement per row cost about twice as much per
// entry (database/sql's and SQLite's work per statement).
var chunkSizes = [...]int{64, 32, 16, 8, 4, 2, 1}

// chunked returns query(size) for each of chunkSizes.
func chunked(query func(size int) string) []string {
	qs := make([]string, len(chunkSizes))
	for i, size := range chunkSizes {
		qs[i] = query(size)
	}
	return qs
}

// eachChunk cuts n rows into parts of chunkSizes and calls f with each
// part's start, its size and the index of its size in chunkSizes.
func eachChunk(n int, f func(start, size, i int) error) error {
	start := 0
	for i, size := range chunkSizes {
		for n-start >= size {
			if err := f(start, size, i); err != nil {
				return err
			}
			start += size
		}
	}
	return nil
}

var (
	// insertPlainChunks append entries of the host "" (ID 0), priority 0:
	// one data parameter per row.
	insertPlainChunks = chunked(func(k int) string {
		return "INSERT INTO queue (data) VALUES (?)" + strings.Repeat(", (?)", k-1)
	})
	// insertHostedChunks append entries: data, host ID and rank per row.
	insertHostedChunks = chunked(func(k int) string {
		return "INSERT INTO queue (data, host_id, rank) VALUES (?, ?, ?)" + strings.Repeat(", (?, ?, ?)", k-1)
	})
	// ackChunks delete the held leases of the seqs given, all of one
	// Lease's token, the last parameter: all of them, or none when one is
	// not held (the count in the subquery, which SQLite computes once per
	// execution, is short), so that a chunk needs no savepoint to be
	// undone before its IDs are taken one at a time. The unary + keeps
	// SQLite from reading the leases' index rather than the rowids.
	ackChunks = chunked(func(k int) string {
		held := fmt.Sprintf("seq IN (%s) AND lease_token = ?%d AND +lease_until IS NOT NULL", params(1, k), k+1)
		return fmt.Sprintf("DELETE FROM queue WHERE %s AND (SELECT COUNT(*) FROM queue WHERE %s) = %d", held, held, k)
	})
)

// params is the list of the numbered parameters ?from to ?to, "?1, ?2".
func params(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		if i > from {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "?%d", i)
	}
	return b.String()
}
