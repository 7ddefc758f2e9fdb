package magpie_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeQuickStart keeps the README's quick start identical to Example,
// which go test runs, so the README cannot show code that does not work.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "func Example() {")
	if start < 0 {
		t.Fatal("example_test.go has no func Example")
	}
	end := strings.Index(s[start:], "\n}\n")
	if end < 0 {
		t.Fatal("func Example has no end")
	}
	example := s[start : start+end+3]
	if !strings.Contains(string(readme), "```go\n"+example+"```") {
		t.Errorf("README.md's quick start differs from Example in example_test.go; copy it over:\n%s", example)
	}
}
