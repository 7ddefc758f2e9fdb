// Package debug holds debuggers: receivers of the events a Collector emits
// while it crawls (a request starts, headers arrive, a response is parsed,
// an element matches, an error is reported, a page is scraped).
//
// Attach one with magpie.Debugger(d) or c.SetDebugger(d). The Collector
// calls Init once when the debugger is attached, then Event for every event,
// from the engine's workers and so concurrently: implementations must be safe
// for concurrent use. Event must not block for long, as the crawl waits for
// it.
package debug

// Event types, as Colly names them.
const (
	// EventRequest is sent when a request is about to be made, before OnRequest.
	EventRequest = "request"
	// EventRequestHeaders is sent before OnRequestHeaders callbacks.
	EventRequestHeaders = "requestHeaders"
	// EventResponseHeaders is sent when a response's headers arrive.
	EventResponseHeaders = "responseHeaders"
	// EventResponse is sent when a successful response is analysed.
	EventResponse = "response"
	// EventHTML is sent for each element an OnHTML selector matches.
	EventHTML = "html"
	// EventXML is sent for each node an OnXML query matches.
	EventXML = "xml"
	// EventError is sent when a request fails.
	EventError = "error"
	// EventScraped is sent after a page's callbacks have all run.
	EventScraped = "scraped"
	// EventFetch is sent when a Fetcher (such as a headless browser) has
	// downloaded a request in place of the HTTP client, or failed to.
	EventFetch = "fetch"
)

// Debugger receives a collector's events.
type Debugger interface {
	// Init prepares the debugger; the Collector calls it once, when the
	// debugger is attached. An error there leaves the debugger detached.
	Init() error
	// Event receives one event. It is called concurrently.
	Event(e *Event)
}

// Event is one thing that happened during a crawl. Values holds the event's
// details as text, such as "url", "method", "status" or "error"; the
// debugger may keep the Event and its map, which the Collector does not
// touch again.
type Event struct {
	// Type is one of the Event* constants.
	Type string
	// RequestID is the ID of the request the event belongs to.
	RequestID uint32
	// CollectorID is the ID of the collector that emitted it.
	CollectorID uint32
	// Values are the event's details.
	Values map[string]string
}
