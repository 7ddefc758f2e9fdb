// Login: post a form, keep the session cookie, then scrape a members-only page.
//
//	go run ./_examples/login [BASE_URL]
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
)

func main() {
	base := ""
	if len(os.Args) > 1 {
		base = os.Args[1]
	} else {
		srv := site.Start()
		defer srv.Close()
		base = srv.URL
	}

	c := magpie.NewCollector()

	c.OnHTML("p.secret", func(e *magpie.HTMLElement) {
		fmt.Println("members' page says:", e.Text)
	})
	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("%s %s -> %d\n", r.Request.Method, r.Request.URL, r.StatusCode)
	})

	// The session cookie the server sets is kept in the collector's cookie jar.
	if err := c.Post(base+"/login", map[string]string{"username": "admin", "password": "magpie"}); err != nil {
		log.Fatal("login: ", err)
	}
	if err := c.Visit(base + "/members"); err != nil {
		log.Fatal("members: ", err)
	}
}
