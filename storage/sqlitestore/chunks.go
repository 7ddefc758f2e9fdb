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
	// ackChunks delete the held leases of the entries given, a seq and
	// the token of its lease each: all of them, or none when one is not
	// held (the count in the subquery, which SQLite computes once per
	// execution, is short), so that a chunk needs no savepoint to be
	// undone before its IDs are taken one at a time. The tokens are
	// matched by a CASE on seq, so that a chunk may hold the IDs of
	// several leases (a run acknowledges entries of many). The unary +
	// keeps SQLite from reading the leases' index rather than the rowids.
	ackChunks = chunked(func(k int) string {
		var seqs, tokens strings.Builder
		for j := 1; j < 2*k; j += 2 {
			if j > 1 {
				seqs.WriteString(", ")
			}
			fmt.Fprintf(&seqs, "?%d", j)
			fmt.Fprintf(&tokens, " WHEN ?%d THEN ?%d", j, j+1)
		}
		held := fmt.Sprintf("seq IN (%s) AND lease_token = CASE seq%s END AND +lease_until IS NOT NULL", &seqs, &tokens)
		return fmt.Sprintf("DELETE FROM queue WHERE %s AND (SELECT COUNT(*) FROM queue WHERE %s) = %d", held, held, k)
	})
)
