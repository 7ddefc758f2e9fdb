package feed

import "errors"

// ErrUnknownFormat is returned by Create for a file name whose extension is
// not .jsonl (.ndjson), .csv or .json, when no WithFormat option names the
// format.
var ErrUnknownFormat = errors.New("feed: unknown format")

// ErrClosed is returned by Write after Close or Abort.
var ErrClosed = errors.New("feed: exporter closed")

// ErrLeftover is returned by Create when the destination has leftovers of
// an exporter that never reached Close (its process was killed or crashed):
// temporary files holding complete items. The error names each file and
// its item count. Pass Resume to adopt them, or remove them.
var ErrLeftover = errors.New("feed: leftover items of an unfinished export")

// ErrCorrupt is returned by Write when an earlier write stopped part way
// (a full disk, a closed pipe) and the partial item could not be taken back,
// so the output ends in a broken item; every later Write returns it too.
var ErrCorrupt = errors.New("feed: output holds a partial item")

// ErrDroppedFields is returned by Close, after the export is complete, when
// CSV items had fields that the header (taken from the first item) lacks;
// those values are not in the file. The error names the fields and counts.
// Columns fixes the header and makes this choice explicit.
var ErrDroppedFields = errors.New("feed: CSV fields not in the header were dropped")

// ErrNotDiscarded is returned by Abort when part of what was written could
// not be taken back: bytes already sent to an io.Writer, a FIFO or a device,
// or lines of an Append file that other writers appended after.
var ErrNotDiscarded = errors.New("feed: written items could not be discarded")

// ErrItemsNotWritten is returned by Close, after the export is complete,
// when some Writes failed (a full disk, an item that could not be encoded):
// those items are not in the output, though every one that is parses. The
// error counts them and names the first failure. Each failed Write returned
// its own error too; this one is for a caller that checks only Close.
var ErrItemsNotWritten = errors.New("feed: items were not written")

// ErrNotAppendable is returned by Create with Append when the existing CSV
// or JSON destination is not a complete export in that format (bytes after
// its last item, or a CSV header other than Columns), so its items cannot
// be carried over into the new file without losing some.
var ErrNotAppendable = errors.New("feed: the existing file cannot be appended to")
