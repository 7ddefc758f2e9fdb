// Package buffer provides the typed hand-offs between the scheduler's stages.
//
// Buffer is a fixed-capacity FIFO whose Put and Get never block: a full
// buffer refuses a put, an empty one refuses a get, and both report ErrClosed
// after Close.
//
// Pool is the double-layer design: between one and MaxBufferNumber buffers
// kept in a channel of buffers.
//
//	          ┌──────────── chan *Buffer (cap MaxBufferNumber) ────────────┐
//	Put ──►   │ take one buffer → try it → return it to the back            │   ──► Get
//	          │ [buf 1] [buf 2] … [buf n]     n grows on full, shrinks on   │
//	          │                               empty, 1 ≤ n ≤ max            │
//	          └─────────────────────────────────────────────────────────────┘
//
// A caller holds a buffer only for one non-blocking try, so each buffer is
// touched by one goroutine at a time, and returning it to the back spreads
// items evenly. The pool as a whole is therefore not FIFO. Put blocks while
// every buffer is full and Get while every buffer is empty; a blocked caller
// sleeps on a signal channel until the other side makes progress, its context
// is done, or the pool is closed. Close hands back every item still inside.
package buffer
