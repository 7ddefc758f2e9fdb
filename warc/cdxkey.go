package warc

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A request other than a GET is indexed under its URL with the method and
// the body's parameters appended to its query, as pywb and warcio key it
// ("…/form?__wb_method=post&a=1&b=two"), so that replay tells a POST from a
// GET of the same URL and two POSTs with different bodies apart. What
// follows is what warcio's cdx-index does (its postToGetUrl), step by step,
// so that its index of a file and the Writer's agree.

// maxQueryBody is the longest body query kept, in UTF-16 code units, as
// warcio bounds it when indexing.
const maxQueryBody = 4096

// maxKeyBody bounds the request body read to key it: the form and base64
// cases need far less; a JSON or multipart body past it is keyed on what
// was read.
const maxKeyBody = 4 << 20

// methodKey is what the index adds for a request that is not a GET: the
// query parameters to sort into the key's query (lower case, encoded as a
// URL parser leaves them) and the body query warcio lists as requestBody.
type methodKey struct {
	params []string
	body   string
}

// keyForMethod returns the key additions of a request with method, its
// Content-Type header and its body as recorded (after the header; chunked
// framing, if any, kept, as warcio reads it).
func keyForMethod(method, contentType string, body []byte) methodKey {
	var d string
	mime, _, _ := strings.Cut(contentType, ";")
	switch mime {
	case "application/x-www-form-urlencoded":
		d = decodeUTF8(body)
	case "application/json", "text/plain":
		// A body that is not JSON has no parameters: warcio reads it as
		// an empty object.
		d = jsonQuery(decodeUTF8(body))
	case "multipart/form-data":
		d = multipartQuery(decodeUTF8(body), contentType)
	default:
		d = postData(body)
	}
	d = cutUTF16(d, maxQueryBody)
	k := methodKey{body: d}
	dec, ok := decodeURI(d)
	if !ok {
		dec = ""
	}
	k.params = strings.Split(urlQueryForm(strings.ToLower("__wb_method="+method+"&"+dec)), "&")
	return k
}

// postData is the body as warcio keys one it cannot read as parameters.
func postData(body []byte) string {
	return "__wb_post_data=" + base64.StdEncoding.EncodeToString(body)
}

// decodeUTF8 decodes b as UTF-8, each invalid byte becoming U+FFFD.
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String()
}

// cutUTF16 cuts s after n UTF-16 code units, as a JavaScript string's slice
// does; half a surrogate pair left at the end becomes U+FFFD.
func cutUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 1 {
			w = 1
		}
		if units+w > n {
			if units < n {
				return s[:i] + "\uFFFD"
			}
			return s[:i]
		}
		units += w
	}
	return s
}

// decodeURI undoes the percent-encoding of s as JavaScript's decodeURI
// does: escapes of characters that delimit a URI (";/?:@&=+$,#") are kept;
// a malformed escape or invalid UTF-8 fails (false).
func decodeURI(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '%' {
			out.WriteByte(s[i])
			i++
			continue
		}
		b, ok := hexByte(s, i)
		if !ok {
			return "", false
		}
		if b < 0x80 {
			if strings.IndexByte(";/?:@&=+$,#", b) >= 0 {
				out.WriteString(s[i : i+3])
			} else {
				out.WriteByte(b)
			}
			i += 3
			continue
		}
		// A multi-byte character: as many escapes as its first byte says.
		n := 0
		switch {
		case b&0xE0 == 0xC0:
			n = 2
		case b&0xF0 == 0xE0:
			n = 3
		case b&0xF8 == 0xF0:
			n = 4
		default:
			return "", false
		}
		seq := []byte{b}
		for k := 1; k < n; k++ {
			c, ok := hexByte(s, i+3*k)
			if !ok {
				return "", false
			}
			seq = append(seq, c)
		}
		if _, w := utf8.DecodeRune(seq); w != n {
			return "", false
		}
		out.Write(seq)
		i += 3 * n
	}
	return out.String(), true
}

// hexByte reads the escape "%XX" at s[i:].
func hexByte(s string, i int) (byte, bool) {
	if i+3 > len(s) || s[i] != '%' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
	return byte(v), err == nil
}

// urlQueryForm is q as a URL parser leaves a query it is given: tabs and
// newlines removed, cut at a fragment, trailing spaces and controls
// trimmed (q ends the URL), and controls, spaces, quotes, angle brackets
// and non-ASCII bytes percent-encoded (WHATWG URL, special schemes).
func urlQueryForm(q string) string {
	q = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(q)
	if i := strings.IndexByte(q, '#'); i >= 0 {
		q = q[:i]
	}
	q = strings.TrimRightFunc(q, func(r rune) bool { return r <= ' ' })
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c < 0x21 || c > 0x7E || c == '"' || c == '<' || c == '>' || c == '\'' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// params is an ordered list of query parameters, as URLSearchParams holds
// them.
type params [][2]string

// set replaces the first parameter named name and drops the others, or
// appends one, as URLSearchParams.set does.
func (p *params) set(name, value string) {
	out := make(params, 0, len(*p)+1)
	found := false
	for _, kv := range *p {
		if kv[0] == name {
			if found {
				continue
			}
			found, kv[1] = true, value
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, [2]string{name, value})
	}
	*p = out
}

func (p *params) has(name string) bool {
	return slices.ContainsFunc(*p, func(kv [2]string) bool { return kv[0] == name })
}

// String encodes p as application/x-www-form-urlencoded.
func (p params) String() string {
	var b strings.Builder
	for i, kv := range p {
		if i > 0 {
			b.WriteByte('&')
		}
		formEncode(&b, kv[0])
		b.WriteByte('=')
		formEncode(&b, kv[1])
	}
	return b.String()
}

func formEncode(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
			b.WriteByte('+')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '*', c == '-', c == '.', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
}

// jsonQuery flattens a JSON body into query parameters as warcio does:
// each scalar under the name of the innermost key holding it (an array's
// elements under the array's), a repeated name numbered ("a.2_"), null as
// "null", empty strings left out. A body that is not JSON gives "".
func jsonQuery(text string) string {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return ""
	}
	if _, err := dec.Token(); err != io.EOF {
		return "" // more than one value
	}
	var p params
	seen := map[string]int{}
	name := func(n string) string {
		if !p.has(n) {
			return n
		}
		if _, ok := seen[n]; !ok {
			seen[n] = 1
		}
		seen[n]++
		return n + "." + strconv.Itoa(seen[n]) + "_"
	}
	var walk func(v any, key string)
	walk = func(v any, key string) {
		var s string
		switch v := v.(type) {
		case nil:
			s = "null"
		case object:
			for _, kv := range v.ordered() {
				walk(kv.v, kv.k)
			}
		case []any:
			for _, e := range v {
				walk(e, key)
			}
		case string:
			s = v
		case bool:
			s = strconv.FormatBool(v)
		case json.Number:
			s = jsNumber(v)
		}
		if s != "" {
			p.set(name(key), s)
		}
	}
	walk(v, "")
	return p.String()
}

// object is a JSON object with its keys in the order they came; a
// repeated key keeps its first place and its last value.
type object []member

type member struct {
	k string
	v any
}

// ordered returns the members in JavaScript's property order: keys that
// are array indexes first, ascending, then the others as they came.
func (o object) ordered() object {
	out := slices.Clone(o)
	slices.SortStableFunc(out, func(a, b member) int {
		ai, aok := arrayIndex(a.k)
		bi, bok := arrayIndex(b.k)
		switch {
		case aok && bok:
			return cmp.Compare(ai, bi)
		case aok:
			return -1
		case bok:
			return 1
		}
		return 0
	})
	return out
}

// arrayIndex reports whether k is a canonical array index ("0", "17"; not
// "01") and its value.
func arrayIndex(k string) (int64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(k, 10, 64)
	if err != nil || n < 0 || n >= math.MaxUint32 {
		return 0, false
	}
	return n, true
}

// decodeOrdered decodes the next JSON value, keeping objects' key order.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var o object
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			if i := slices.IndexFunc(o, func(m member) bool { return m.k == k }); i >= 0 {
				o[i].v = v
			} else {
				o = append(o, member{k, v})
			}
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return tok, nil
}

// jsNumber formats a JSON number as JavaScript's Number#toString does.
func jsNumber(n json.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return string(n)
	}
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		exp = strings.TrimLeft(exp[1:], "0")
		return mant + "e" + string(sign) + exp
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// multipartName finds a part's field name and the first line of its
// value, when the name line is followed by a blank line (no filename, no
// Content-Type of its own), as warcio reads multipart bodies.
var multipartName = regexp.MustCompile(`(?i)name="([^"]+)"\r\n\r\n([^\r\n\x{2028}\x{2029}]*)`)

// multipartQuery turns a multipart/form-data body into query parameters as
// warcio does: the parts split at the boundary (with any dashes around it),
// each simple field once under its name.
func multipartQuery(body, contentType string) string {
	boundary := "undefined" // JavaScript's text for a missing one
	if parts := strings.Split(contentType, "boundary="); len(parts) > 1 {
		boundary = parts[1]
	}
	sep, err := regexp.Compile(`(?im)-*` + regexp.QuoteMeta(boundary) + `-*`)
	if err != nil {
		return ""
	}
	var p params
	for _, part := range sep.Split(body, -1) {
		if m := multipartName.FindStringSubmatch(strings.TrimSpace(part)); m != nil {
			p.set(m[1], m[2])
		}
	}
	return p.String()
}

// appendJSONField appends `,"name":value` with value as a JSON string.
func appendJSONField(b []byte, name, value string) []byte {
	b = append(b, ',')
	b = appendJSONString(b, name)
	b = append(b, ':')
	return appendJSONString(b, value)
}
