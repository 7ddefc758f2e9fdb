package magpie

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestSaveWritesBytesReceived: a PNG served as text/html; charset=utf-8
// reaches callbacks and Save unchanged (binary data is not transcoded); a
// text page with invalid UTF-8 reaches callbacks with U+FFFD but Save writes
// the bytes received; a Body replaced by a callback is what Save writes.
func TestSaveWritesBytesReceived(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0xff, 0xfe, 0x80, 0x81, 0xc3, 0x28, 0x00, 0x9f)
	text := []byte("<html><body>caf\xe9 \xff</body></html>") // Latin-1 bytes in a page declared UTF-8
	bodies := map[string][]byte{"/image": png, "/text": text, "/replaced": text}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(bodies[r.URL.Path])
	}))
	defer srv.Close()

	dir := t.TempDir()
	tests := []struct {
		path           string
		wantBody, want []byte // Body in callbacks, file written by Save
	}{
		{"/image", png, png},
		{"/text", []byte("<html><body>caf\ufffd \ufffd</body></html>"), text},
		{"/replaced", []byte("mine"), []byte("mine")},
	}
	for _, tc := range tests {
		c := NewCollector(IgnoreRobotsTxt())
		var body, raw []byte
		var saveErr error
		file := filepath.Join(dir, tc.path[1:])
		c.OnResponse(func(r *Response) {
			if tc.path == "/replaced" {
				r.Body = []byte("mine")
			}
			body, raw = r.Body, r.RawBody()
			saveErr = r.Save(file)
		})
		if err := c.Visit(srv.URL + tc.path); err != nil {
			t.Fatalf("Visit(%s) error = %v", tc.path, err)
		}
		if saveErr != nil {
			t.Fatalf("Save() error = %v", saveErr)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: Save wrote %d bytes %q, want %d bytes %q", tc.path, len(got), got, len(tc.want), tc.want)
		}
		if !bytes.Equal(body, tc.wantBody) {
			t.Errorf("%s: Body = %q, want %q", tc.path, body, tc.wantBody)
		}
		if tc.path != "/replaced" && !bytes.Equal(raw, bodies[tc.path]) {
			t.Errorf("%s: RawBody() = %q, want the bytes received %q", tc.path, raw, bodies[tc.path])
		}
	}
}
