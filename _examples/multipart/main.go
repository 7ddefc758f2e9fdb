// Multipart: send a multipart/form-data POST (form fields and a file) and
// read the server's answer.
//
//	go run ./_examples/multipart [URL]
//
// Without a URL it starts a local server that answers with what it received.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"

	"github.com/magpiecrawl/magpie"
)

func main() {
	target := ""
	if len(os.Args) > 1 {
		target = os.Args[1]
	} else {
		srv := httptest.NewServer(http.HandlerFunc(echoForm))
		defer srv.Close()
		target = srv.URL + "/upload"
	}

	c := magpie.NewCollector()
	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("%d from %s:\n%s", r.StatusCode, r.Request.URL, r.Body)
	})
	c.OnError(func(r *magpie.Response, err error) {
		fmt.Println("error:", err)
	})

	parts := map[string][]byte{
		"name":    []byte("magpie"),
		"comment": []byte("collects shiny things"),
		"file":    []byte("line one\nline two\n"),
	}
	if err := c.PostMultipart(target, parts); err != nil {
		log.Fatal(err)
	}
}

// echoForm answers with each part it received and its size.
func echoForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	names := make([]string, 0, len(r.MultipartForm.Value)+len(r.MultipartForm.File))
	for k := range r.MultipartForm.Value {
		names = append(names, k)
	}
	for k := range r.MultipartForm.File {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		if vs, ok := r.MultipartForm.Value[k]; ok {
			fmt.Fprintf(&b, "  field %s = %q\n", k, vs[0])
			continue
		}
		f, err := r.MultipartForm.File[k][0].Open()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(f)
		f.Close()
		fmt.Fprintf(&b, "  file  %s = %d bytes\n", k, len(data))
	}
	fmt.Fprint(w, b.String())
}
