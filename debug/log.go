package debug

import (
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LogDebugger writes one log line per event: a counter, the time since Init,
// the event's type, IDs and values. Set its fields before attaching it. The
// zero value writes to standard error with no prefix and no timestamp. Safe
// for concurrent use once initialised.
type LogDebugger struct {
	// Output is where lines go (standard error when nil).
	Output io.Writer
	// Prefix starts every line.
	Prefix string
	// Flag is the log package's flags for each line (log.LstdFlags and so on).
	Flag int

	logger *log.Logger
	start  time.Time
	once   sync.Once
	// mu guards counter; it is held while a line is written, so that lines
	// appear in counter order.
	mu      sync.Mutex
	counter int64
}

// Init sets the debugger up; it never fails.
func (l *LogDebugger) Init() error {
	l.once.Do(func() {
		out := l.Output
		if out == nil {
			out = os.Stderr
		}
		l.logger = log.New(out, l.Prefix, l.Flag)
		l.start = time.Now()
	})
	return nil
}

// Event writes e as one line. Values are printed in key order so that lines
// are stable across runs.
func (l *LogDebugger) Event(e *Event) {
	_ = l.Init() // a debugger used without Init still logs
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counter++
	n := l.counter
	l.logger.Printf("[%06d] %d [%6d - %s] %s (%s)\n", n, e.CollectorID, e.RequestID, e.Type,
		formatValues(e.Values), time.Since(l.start).Round(time.Microsecond))
}

// formatValues prints values as sorted key=value pairs.
func formatValues(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(v[k]))
	}
	return b.String()
}
