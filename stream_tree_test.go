package magpie

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
)

// checkLinks reports the first node under n whose parent or sibling
// pointers disagree with its place in the tree, or "".
func checkLinks(n *html.Node) string {
	var prev *html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Parent != n || c.PrevSibling != prev {
			return fmt.Sprintf("%q under %q: wrong parent or previous sibling", c.Data, n.Data)
		}
		if d := checkLinks(c); d != "" {
			return d
		}
		prev = c
	}
	if n.LastChild != prev {
		return fmt.Sprintf("%q: wrong last child", n.Data)
	}
	return ""
}

// compareTree checks that where streamTree builds body's document, it is
// html.Parse's node for node. It reports whether streamTree built it.
func compareTree(t *testing.T, name string, body []byte) bool {
	t.Helper()
	got, ok := streamTree(body)
	if !ok {
		if got != nil {
			t.Errorf("%s: streamTree gave up but returned a document", name)
		}
		return false
	}
	want, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: streamTree built a document html.Parse refuses (%v)", name, err)
		return true
	}
	if d := sameTree(got, want); d != "" {
		t.Errorf("%s: tree differs from html.Parse's:\n%s", name, d)
		return true
	}
	if d := checkLinks(got); d != "" {
		t.Errorf("%s: %s", name, d)
	}
	return true
}

// treeCases exercise what comes before and after the body, which the
// matching streamer never builds. built tells whether streamTree is
// expected to build the page (y) or leave it to html.Parse (n).
var treeCases = []struct {
	name  string
	html  string
	built string
}{
	{"empty", ``, "y"},
	{"white space only", " \n\t", "y"},
	{"text only", `  hello`, "y"},
	{"doctype html", `<!DOCTYPE html><title>t</title>x`, "y"},
	{"doctype upper case", `<!DOCTYPE HTML>x`, "y"},
	{"doctype empty", `<!DOCTYPE>x`, "y"},
	{"doctype public", `<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">` + "\n" + `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head><body>b</body></html>`, "y"},
	{"doctype system", `<!doctype html system 'about:legacy-compat'><p>x`, "y"},
	{"doctype late", `<p>x<!DOCTYPE html>y`, "y"},
	{"comments everywhere", "<!--a--><!DOCTYPE html><!--b--><html><!--c--><head><!--d--><title>t</title><!--e--></head><!--f--><body><!--g--></body><!--h--></html><!--i-->", "y"},
	{"white space everywhere", "\n<!DOCTYPE html>\n<html>\n<head>\n<meta charset=utf-8>\n<title>t</title>\n</head>\n<body>\n<p>x</p>\n</body>\n</html>\n", "y"},
	{"text in head", `<head><title>t</title> text<meta name=a></head>`, "y"},
	{"head elements after head", "<head></head> <link rel=a><script>s</script><style>x</style><title>t</title><meta name=m> <p>x", "y"},
	{"noscript after head", `<head></head><noscript>n</noscript>`, "y"},
	{"noscript in head", `<head><noscript><link rel=a></noscript></head>`, "y"},
	{"implied head by body tag", `<html><body class=b><p>x`, "y"},
	{"html attributes merged", `<html lang=en><head><html lang=fr dir=rtl></head><body><html data-x=1 lang=de>`, "y"},
	{"body attributes merged", `<body class=a><div><body class=b id=c></div>`, "y"},
	{"html attributes after body", `<body></body><html data-late=1><!--x-->`, "y"},
	{"end tags before html", `</div></head></p><p>x`, "y"},
	{"end br before body", `<head></head></br>`, "n"},
	{"end tags in head", `<head></div></body><p>x`, "y"},
	{"end head twice", `<head></head></head><title>x</title>`, "y"},
	{"head twice", `<head><head><title>a</title></head><head>b`, "y"},
	{"unclosed title", `<head><title>never closed`, "y"},
	{"unclosed script in body", `<p><script>never`, "y"},
	{"frameset", `<head></head><frameset><frame></frameset>`, "n"},
	{"template in head", `<head><template><p>x</p></template></head>`, "n"},
	{"text after html", "<body>x</body></html>\n text <!--c-->", "y"},
	{"comment after body with open div", "<div>x</body><!--c--> <p>y", "y"},
	{"doctype after body", `<body>x</body><!DOCTYPE html>y`, "y"},
	{"text with references", "<title>a &amp; b</title><p>c &lt; d\r\ne</p> &nbsp; <a title=\"x&amp;y\" href=h>l</a>", "y"},
	{"carriage returns", "<!DOCTYPE html>\r\n<html>\r\n<head>\r\n<title>t</title>\r\n</head>\r\n<body>\r\n<p>x</p>\r\n</body>\r\n</html>\r\n", "y"},
	{"attributes duplicated and unquoted", `<html lang=en lang=fr><body><p id=a id=b class='c' data-x=y>x`, "y"},
	{"svg at top", `<svg><rect/></svg>`, "y"},
	{"processing instruction", `<?xml version="1.0"?><html><p>x`, "y"},
	{"doctype with references", `<!DOCTYPE &gt; PUBLIC "&gt;" "&gt;"><p>x`, "y"},
	{"doctype name with a reference", `<!DOCTYPE ht&amp;ml><p>x`, "y"},
	{"doctype with a carriage return", "<!DOCTYPE html\r\nSYSTEM \"about:legacy-compat\"><p>x", "y"},
	{"bench page", string(benchPage("http://127.0.0.1:1", 3, 40)), "y"},
}

func TestStreamTreeCases(t *testing.T) {
	for _, tc := range treeCases {
		t.Run(tc.name, func(t *testing.T) {
			if built := compareTree(t, tc.name, []byte(tc.html)); built != (tc.built == "y") {
				t.Errorf("streamTree built = %v, want %v", built, tc.built == "y")
			}
		})
	}
}

// TestStreamTreeStreamCases: every StreamHTML case that streams is built
// whole as well, and is html.Parse's tree.
func TestStreamTreeStreamCases(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			built := compareTree(t, tc.name, []byte(tc.html))
			if !built && strings.Contains(tc.stream, "y") && !strings.Contains(tc.name, "svg") {
				t.Errorf("streamTree gave up on a page StreamHTML streams")
			}
		})
	}
}

// TestStreamTreeNodesKept: a page's nodes are its own; a tree kept from one
// page is unchanged by the pages after it.
func TestStreamTreeNodesKept(t *testing.T) {
	first := []byte(`<html lang=en><body><div class=a><p>first <a href=/x>x</a></div>`)
	kept, ok := streamTree(first)
	if !ok {
		t.Fatal("streamTree gave up on the first page")
	}
	for i := range 20 {
		if _, ok := streamTree(fmt.Appendf(nil, `<body class=b><ul><li>%d<li><b>x</b></ul>`, i)); !ok {
			t.Fatalf("streamTree gave up on page %d", i)
		}
	}
	want, _ := html.Parse(bytes.NewReader(first))
	if d := sameTree(kept, want); d != "" {
		t.Errorf("the first page's tree changed:\n%s", d)
	}
}

// htmlCorpus lists the manual pages htmlCorpusGlobs find, or skips.
func htmlCorpus(t *testing.T) []string {
	t.Helper()
	var files []string
	seen := map[string]bool{}
	for _, glob := range htmlCorpusGlobs {
		dirs, _ := filepath.Glob(glob)
		for _, dir := range dirs {
			if dir, _ = filepath.EvalSymlinks(dir); dir == "" || seen[dir] {
				continue
			}
			seen[dir] = true
			filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && strings.HasSuffix(path, ".html") {
					files = append(files, path)
				}
				return nil
			})
		}
	}
	if len(files) == 0 {
		if os.Getenv("MAGPIE_REQUIRE_HTML_CORPUS") != "" {
			t.Fatalf("no HTML manuals in %q; install python3-doc and postgresql-doc", htmlCorpusGlobs)
		}
		t.Skip("no HTML manuals installed (apt-get install python3-doc postgresql-doc); set MAGPIE_REQUIRE_HTML_CORPUS to fail instead")
	}
	slices.Sort(files)
	return files
}

// TestStreamTreeCorpus is the differential test over real pages: every
// manual page streamTree builds is html.Parse's tree, and most are built.
func TestStreamTreeCorpus(t *testing.T) {
	files := htmlCorpus(t)
	if raceOn || testing.Short() {
		// A sample, as TestStreamHTMLCorpus takes.
		var sample []string
		for i := 0; i < len(files); i += 8 {
			sample = append(sample, files[i])
		}
		files = sample
	}
	built := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if compareTree(t, f, body) {
			built++
		}
		if t.Failed() {
			break
		}
	}
	t.Logf("streamTree built %d of %d manual pages", built, len(files))
	if built*10 < len(files)*9 {
		t.Errorf("streamTree built only %d of %d pages", built, len(files))
	}
}

// html5libInputs returns the inputs of the html5lib tree-construction tests
// that x/net/html carries in its module (testdata/html5lib-tests and
// testdata/go), each named by its file.
func html5libInputs(tb testing.TB) (names, inputs []string) {
	tb.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/net").Output()
	if err != nil {
		tb.Fatalf("finding golang.org/x/net's module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "html", "testdata")
	files, _ := filepath.Glob(filepath.Join(dir, "html5lib-tests", "tree-construction", "*.dat"))
	more, _ := filepath.Glob(filepath.Join(dir, "go", "*.dat"))
	files = append(files, more...)
	if len(files) == 0 {
		tb.Fatalf("no tree-construction tests in %s", dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		// Each test is "#data", its input lines, then "#errors" and the
		// other sections, each under a line starting with "#".
		var data []string
		in := false
		for line := range strings.Lines(string(b) + "\n#end\n") {
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "#data":
				in, data = true, data[:0]
			case in && strings.HasPrefix(line, "#"):
				in = false
				names = append(names, filepath.Base(f))
				inputs = append(inputs, strings.Join(data, "\n"))
			case in:
				data = append(data, line)
			}
		}
	}
	return names, inputs
}

// TestStreamTreeHTML5Lib is the differential test over html5lib's
// tree-construction inputs: every one streamTree builds is html.Parse's
// tree, and many are built.
func TestStreamTreeHTML5Lib(t *testing.T) {
	names, inputs := html5libInputs(t)
	built := 0
	for i, input := range inputs {
		if compareTree(t, fmt.Sprintf("%s: %q", names[i], input), []byte(input)) {
			built++
		}
	}
	t.Logf("streamTree built %d of %d inputs", built, len(inputs))
	if built < 500 {
		t.Errorf("streamTree built only %d of %d inputs", built, len(inputs))
	}
}

// FuzzStreamTree compares streamTree's document with html.Parse's on any
// input: whenever streamTree does not give up, they must be the same.
func FuzzStreamTree(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.html))
	}
	for _, tc := range treeCases {
		f.Add([]byte(tc.html))
	}
	_, inputs := html5libInputs(f)
	for _, in := range inputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		compareTree(t, "fuzz input", body)
	})
}

// BenchmarkStreamTree builds the bench page's document with html.Parse and
// with streamTree.
func BenchmarkStreamTree(b *testing.B) {
	body := benchPage("http://127.0.0.1:1", 0, 1000)
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := html.Parse(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := streamTree(body); !ok {
				b.Fatal("streamTree gave up on the bench page")
			}
		}
	})
}

// TestTreePathWithoutParse: a selector that needs the whole document (a
// descendant) gets the bench page's links from the tree streamTree builds,
// as many and in the same order as html.Parse's tree gives them, at a
// fraction of html.Parse's allocations (465 on this page alone).
func TestTreePathWithoutParse(t *testing.T) {
	c := NewCollector()
	var got []string
	c.OnHTML("main p a[href]", func(e *HTMLElement) {
		got = append(got, e.Attr("href")+" "+e.Text)
	})
	resp := benchResponse(t, c)
	root, err := html.Parse(bytes.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	goquery.NewDocumentFromNode(root).Find("main p a[href]").Each(func(_ int, s *goquery.Selection) {
		href, _ := s.Attr("href")
		want = append(want, href+" "+s.Text())
	})
	if err := c.runResponseCallbacks(resp, false); err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("OnHTML saw %q, want %q", got, want)
	}
	allocs := testing.AllocsPerRun(20, func() {
		got = got[:0]
		if err := c.runResponseCallbacks(resp, false); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("the tree path: %.0f allocations for the bench page", allocs)
	if allocsCounted(t) && allocs > 200 {
		t.Errorf("the tree path cost %.0f allocations for the bench page, want at most 200 (html.Parse alone: 465)", allocs)
	}
}

// A string a callback keeps from a page (an attribute, an element's text)
// holds only its own bytes, as with html.Parse: a crawler that collects
// each page's links or title must not keep every page it read.
func TestStreamTreeKeptStringsDoNotHoldThePage(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const pages = 100
	filler := strings.Repeat("<p>"+strings.Repeat("words of a long page ", 50)+"</p>\n", 64) // about 64 KB
	var kept []string
	before := heap()
	for i := range pages {
		body := fmt.Appendf(nil, "<!DOCTYPE html><html><head><title>page %d</title></head><body>\n%s<a href=\"/p/%d\">next</a>\n</body></html>", i, filler, i+1)
		doc, ok := streamTree(body)
		if !ok {
			t.Fatalf("page %d: streamTree gave up", i)
		}
		sel := goquery.NewDocumentFromNode(doc)
		href, _ := sel.Find("a").Attr("href")
		kept = append(kept, href, nodeText(sel.Find("title").Nodes[0]), nodeText(sel.Find("a").Nodes[0]))
	}
	held := int64(heap()) - int64(before)
	runtime.KeepAlive(kept)
	if want := fmt.Sprintf("/p/%d", pages); kept[len(kept)-3] != want {
		t.Fatalf("last href = %q, want %q", kept[len(kept)-3], want)
	}
	// Each page is about 64 KB: holding them would be over 6 MB.
	if limit := int64(pages * 1024); held > limit {
		t.Errorf("%d strings kept from %d pages hold %d bytes of heap, want at most %d: they keep their pages alive", len(kept), pages, held, limit)
	}
}
