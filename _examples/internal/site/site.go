// Package site serves the small local web sites the examples crawl when no
// URL is given, so every example runs without the internet.
package site

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// Pages is how many pages the sample site has.
const Pages = 30

// Start serves a sample site of Pages pages on 127.0.0.1: each page /page/N
// links to the next two pages, to /missing (a 404) and to another domain.
// It also serves robots.txt (disallowing /private/), a login form at /login
// and a members-only page at /members. Call Close on the result when done.
func Start() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page(w, "Home", `<a href="/page/1">Start reading</a> <a href="/private/admin">Admin</a>`)
	})
	mux.HandleFunc("GET /page/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 1 || n > Pages {
			http.NotFound(w, r)
			return
		}
		var links strings.Builder
		for next := n + 1; next <= min(n+2, Pages); next++ {
			fmt.Fprintf(&links, `<a href="/page/%d">Page %d</a> `, next, next)
		}
		links.WriteString(`<a href="/missing">A broken link</a> <a href="https://example.com/">Elsewhere</a>`)
		page(w, fmt.Sprintf("Page %d", n), links.String())
	})
	mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the server had a bad day", http.StatusInternalServerError)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("username") != "admin" || r.FormValue("password") != "magpie" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cr3t", Path: "/"})
		page(w, "Welcome back", `<a href="/members">Members' area</a>`)
	})
	mux.HandleFunc("GET /members", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("session"); err != nil || c.Value != "s3cr3t" {
			http.Error(w, "log in first", http.StatusForbidden)
			return
		}
		page(w, "Members", `<p class="secret">The members' secret is: magpies collect shiny things.</p>`)
	})
	return httptest.NewServer(mux)
}

func page(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>%s</title></head><body><h1>%s</h1>%s</body></html>", title, title, body)
}
