package main

import (
	"regexp"
	"testing"
)

func TestHubPages(t *testing.T) {
	// 7 leaves, 3 per hub: hubs 0..2, the last with one leaf.
	g := newGenerator(config{pages: 1, links: 3, hosts: 1, frontier: 7, hubLinks: 3}, testBases(1))
	href := regexp.MustCompile(`href="([^"]+)"`)
	links := func(path string) []string {
		t.Helper()
		body, ok := g.hubPage(path)
		if !ok {
			t.Fatalf("hubPage(%q) not found", path)
		}
		var out []string
		for _, m := range href.FindAllStringSubmatch(string(body), -1) {
			out = append(out, m[1])
		}
		return out
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/", []string{"/h/0", "/h/1", "/h/2"}},
		{"/h/0", []string{"/l/0", "/l/1", "/l/2"}},
		{"/h/2", []string{"/l/6"}},
		{"/l/6", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := links(tt.path)
			if len(got) != len(tt.want) {
				t.Fatalf("hubPage(%q) links = %v, want %v", tt.path, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("hubPage(%q) links = %v, want %v", tt.path, got, tt.want)
					break
				}
			}
		})
	}
	for _, path := range []string{"/h/3", "/h/01", "/l/7", "/l/-1", "/p/1", "/x"} {
		if _, ok := g.hubPage(path); ok {
			t.Errorf("hubPage(%q) found, want not found", path)
		}
	}
}
