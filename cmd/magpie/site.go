package main

import (
	"embed"
	"io/fs"
	"net"
	"net/http"
	"time"
)

//go:embed site
var siteFiles embed.FS

// serveSite serves the embedded sample site on a free loopback port and
// returns its base URL and a function that shuts the server down.
func serveSite(latency time.Duration) (baseURL string, shutdown func() error, err error) {
	root, err := fs.Sub(siteFiles, "site")
	if err != nil {
		return "", nil, err
	}
	files := http.FileServerFS(root)
	var handler http.Handler = files
	if latency > 0 {
		// A little latency makes the live progress and the limits visible.
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := time.NewTimer(latency)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
			files.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	shutdown = func() error {
		err := srv.Close()
		<-done
		return err
	}
	return "http://" + ln.Addr().String() + "/", shutdown, nil
}
