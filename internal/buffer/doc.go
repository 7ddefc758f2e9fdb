// Package buffer provides the typed hand-offs between the scheduler's stages.
//
// Buffer is a fixed-capacity FIFO whose Put and Get never block: a full
// buffer refuses a put, an empty one refuses a get, and both report ErrClosed
// after Close.
//
// Pool is the double-layer design: between one and MaxBufferNumber buffers
// kept in a rotation queue of buffers.
//
//	          ┌──────────── ring of *Buffer (cap MaxBufferNumber) ─────────┐
//	Put ──►   │ take the front buffer → try it → return it to the back      │   ──► Get
//	          │ [buf 1] [buf 2] … [buf n]     n grows on full, shrinks on   │
//	          │                               empty, 1 ≤ n ≤ max            │
//	          └─────────────────────────────────────────────────────────────┘
//
// Each buffer is touched by one caller at a time, and returning it to the back
// spreads items evenly. The pool as a whole is therefore not FIFO. Put blocks
// while every buffer is full and Get while every buffer is empty; a blocked
// caller sleeps on a signal channel until the other side makes progress, its
// context is done, or the pool is closed. Close hands back every item still
// inside.
//
// # Why a mutex-guarded ring and not a channel of buffers
//
// The first Pool kept its buffers in a chan *Buffer. Every Put and Get then
// took the channel's lock twice (receive a buffer, send it back), where a plain
// buffered channel takes it once, and the profile of BenchmarkPutGet showed
// half the CPU time in the runtime's lock2/unlock2 on that one contended lock.
// Holding a buffer outside the lock bought no parallelism: the try itself is a
// few nanoseconds. The ring keeps the same rotation order (front out, back in)
// but does take, try and return inside one short sync.Mutex section, so a
// Put or Get costs one lock acquisition, and waiters can register under that
// lock, which makes lost wake-ups impossible by construction; sleepers are
// signalled only when some are registered.
//
// Measured on the 2-core development machine with
//
//	go test -run XXX -bench . -benchtime 2000x -count 3 ./internal/buffer/
//
// (median ns per item, 64-item buffers, at most 4; plain channel of 256):
//
//	                       1 producer/1 consumer   4/4
//	chan of buffers (old)   305 (0.26× chan)       315 (0.22× chan)
//	mutex ring (now)         78–100 (0.75–1.0×)     86–96 (0.7–0.75×)
//	plain channel            75–81                  65–69
package buffer
