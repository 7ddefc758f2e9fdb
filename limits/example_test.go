package limits_test

import (
	"context"
	"fmt"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// A feeder Puts requests, a dispatcher Gets the next one whose host may
// start and reports the outcome with Ticket.Done.
func ExampleGate() {
	lim := limits.New()
	if err := lim.Add(&limits.Rule{DomainGlob: "*.example.com", Delay: time.Second}); err != nil {
		fmt.Println(err)
		return
	}
	g := limits.NewGate[string](lim, 100)
	defer g.Close()
	ctx := context.Background()
	for _, u := range []string{"a.example.com/1", "a.example.com/2", "other.org/1"} {
		host := u[:len(u)-2]
		if err := g.Put(ctx, host, u); err != nil {
			fmt.Println(err)
			return
		}
	}
	// a.example.com/2 must wait a second after a.example.com/1 starts;
	// other.org/1 does not wait behind it.
	for range 2 {
		u, ticket, err := g.Get(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("fetch", u)
		ticket.Done(limits.Result{StatusCode: 200, Latency: 50 * time.Millisecond})
	}
	fmt.Println("parked:", g.Len())
	// Output:
	// fetch a.example.com/1
	// fetch other.org/1
	// parked: 1
}

func ExampleRule_Match() {
	r := &limits.Rule{DomainGlob: "127.0.0.1"}
	fmt.Println(r.Match("127.0.0.1:8080"))
	r = &limits.Rule{DomainGlob: "127.0.0.1:8080"}
	fmt.Println(r.Match("127.0.0.1:8081"))
	// Output:
	// true
	// false
}
