// Package scheduler is magpie's engine: a buffer-pool scheduler that moves
// requests through download, analyze and pipeline stages. It knows nothing of
// HTTP or HTML; it is generic over the request, response and item types so
// the root package can plug in its own.
//
// The flow of one run:
//
//	Start(first…) ─► Admit ─┐                    Submit(…) (no Admit)
//	                        ▼                        │
//	        overflow list ─► feeder ─► request pool ◄┘
//	            ▲                          │ Get
//	            │                          ▼
//	            │               DownloadWorkers × Downloader.Download
//	            │                          │ Put
//	            │                          ▼
//	            │                    response pool
//	            │                          │ Get
//	            │                          ▼
//	            └─ Admit ◄─ reqs ─ AnalyzeWorkers × Analyzer.Analyze
//	                                       │ items, Put
//	                                       ▼
//	                                   item pool
//	                                       │ Get
//	                                       ▼
//	                         PipelineWorkers × Pipeline.Send
//
//	every stage ──► error channel (bounded; overflow counted) ──► Errors()
//
// Each stage has a fixed number of workers; no goroutine is started per
// request or per hand-off. A worker asks the Registrar for the module with
// the lowest score for every call, so several downloaders share the load.
//
// Requests returned by analyzers never block the analyzer: they go into the
// request pool if it has room and otherwise into an unbounded overflow list
// that one feeder goroutine moves into the pool. A bounded hand-off there
// would close a cycle (downloaders wait on analyzers, analyzers on
// downloaders) and could deadlock.
//
// Termination is counted, not polled: a request, the response it becomes and
// the items and requests an analyzer makes from it are counted as pending
// before they are handed on, so Wait returns exactly when nothing is queued
// or being worked on.
//
// Lifecycle: New → Init → Start → Stop, with Status tracking
// uninitialized → initializing → initialized → starting → started →
// stopping → stopped; calls that do not fit the status return a
// *TransitionError. Stop (or cancelling Start's context) cancels in-flight
// work, waits for every goroutine the scheduler started, and hands back what
// was still queued through Summary and Leftovers.
//
// A panic in a module, in Admit or in a parser is recovered and reported as a
// *StageError wrapping ErrPanic; the worker goes on with the next request.
package scheduler
