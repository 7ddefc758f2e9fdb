// Package scheduler is the stage engine under magpie's Collector: buffer
// pools between a download, an analyze and a pipeline stage, each served by
// a fixed (or elastic) pool of workers. It knows nothing of HTTP or HTML; it
// is generic over the request, response and item types so the root package
// can plug in its own. It is internal: magpie's run is its one user.
//
// The flow of one magpie run:
//
//	frontier ─► feeder ─► gate (per-host turn) ─► dispatcher
//	                                                  │ Submit (one per download token)
//	                                                  ▼
//	                                            request pool
//	                                                  │ Get
//	                                                  ▼
//	                              DownloadWorkers × Downloader.Download (run.download: fetch)
//	                                                  │ Put
//	                                                  ▼
//	                                            response pool
//	                                                  │ Get
//	                                                  ▼
//	                              AnalyzeWorkers × Analyzer.Analyze (run.analyze: callbacks)
//	                                                  │ items, Put
//	                                                  ▼
//	                                              item pool
//	                                                  │ Get
//	                                                  ▼
//	                              PipelineWorkers × Pipeline.Send (item processors)
//
//	every stage ──► error channel (bounded; overflow dropped) ──► Errors()
//
// Requests enter only through Submit, which blocks while the request pool
// is full; the root's dispatcher calls it, never a module. New links a
// callback finds do not come back through the scheduler: they go through the
// Collector's admission to the frontier, so no cycle joins the stages.
//
// Each stage has a bounded number of workers; no goroutine is started per
// request or per hand-off. A worker asks the Registrar for the module with
// the lowest score for every call, so several modules of a stage would share
// the load (magpie registers one of each).
//
// Lifecycle: New → Init → Start → Stop, with Status tracking
// uninitialized → initializing → initialized → starting → started →
// stopping → stopped; calls that do not fit the status return a
// *TransitionError. Stop (or cancelling Start's context) cancels in-flight
// work, waits for every goroutine the scheduler started, runs the AfterStop
// functions, and hands back what was still queued through Leftovers (the
// root analyses leftover responses of a queue run).
//
// A panic in a module or a parser is recovered and reported as a
// *StageError wrapping ErrPanic; the worker goes on with the next request.
package scheduler
