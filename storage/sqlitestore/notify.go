package sqlitestore

import (
	"sync"
	"time"
)

// waker feeds Store.Notify: it signals at once after a Push or Release, and
// arms a timer for the earliest future moment an entry becomes ready (a
// lease expiring, a not-before time arriving), so consumers need not poll
// for events of their own process.
type waker struct {
	ch chan struct{}

	// mu guards timer, at and stopped.
	mu      sync.Mutex
	timer   *time.Timer
	at      time.Time // when timer fires; zero when it is not armed
	stopped bool
}

func (w *waker) init() { w.ch = make(chan struct{}, 1) }

// signal sends without blocking; a pending value already stands for this event.
func (w *waker) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// fire is the timer's function: it runs on the timer's own goroutine, which
// only signals and returns.
func (w *waker) fire() {
	w.mu.Lock()
	w.at = time.Time{}
	w.mu.Unlock()
	w.signal()
}

// wakeAt makes sure a signal is sent no later than t. A timer already armed
// for an earlier time is kept.
func (w *waker) wakeAt(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || (!w.at.IsZero() && !t.Before(w.at)) {
		return
	}
	w.at = t
	d := time.Until(t)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
		return
	}
	w.timer.Reset(d)
}

// stop disarms the timer for good.
func (w *waker) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
