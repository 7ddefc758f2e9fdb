package main

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// liveLine is standard error when standard output is a terminal too: the
// live progress report is rewritten in place on the terminal's last line,
// and an item written to standard output would start in the middle of it.
// Items are written through clearFor, which wipes the report first; the
// next report draws it again below them. Safe for concurrent use.
type liveLine struct {
	f *os.File
	// mu guards shown and serialises writes to the terminal.
	mu    sync.Mutex
	shown bool // a progress report is on the line
}

// sharedLine returns the line stdout and stderr share when both are
// terminals, or nil.
func sharedLine(stdout, stderr io.Writer) *liveLine {
	out, ok1 := stdout.(*os.File)
	errf, ok2 := stderr.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(out.Fd())) || !term.IsTerminal(int(errf.Fd())) {
		return nil
	}
	return &liveLine{f: errf}
}

// Write writes a progress report (or any stderr text) and notes whether it
// leaves text on the line.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.f.Write(p)
	l.shown = len(p) > 0 && !bytes.HasSuffix(p, []byte("\n")) && !bytes.HasSuffix(p, []byte("\r\x1b[K"))
	return n, err
}

// Fd is the terminal's descriptor, for its width.
func (l *liveLine) Fd() uintptr { return l.f.Fd() }

// clearFor wipes the progress report off the line, then runs write (which
// writes an item to standard output) before another report can be drawn.
func (l *liveLine) clearFor(write func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		_, _ = l.f.WriteString("\r\x1b[K")
		l.shown = false
	}
	return write()
}
