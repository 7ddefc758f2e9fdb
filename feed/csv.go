package feed

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// writeRow writes one CSV row (and the header before the first): cells maps
// field names to cell text, keys are the item's fields in order.
func (e *Exporter) writeRow(p *part, keys []string, cells map[string]string) error {
	header := p.header
	if header == nil {
		header = e.opts.columns
	}
	if header == nil {
		header = keys
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if p.items == 0 {
		_ = w.Write(e.neutralise(slices.Clone(header)))
	}
	row := make([]string, len(header))
	for i, k := range header {
		row[i] = cells[k]
	}
	_ = w.Write(e.neutralise(row))
	w.Flush()
	var dropped []string
	if e.opts.columns == nil {
		for _, k := range keys {
			if !slices.Contains(header, k) {
				dropped = append(dropped, k)
			}
		}
	}
	return e.emit(p, buf.Bytes(), func() {
		p.header = header
		for _, k := range dropped {
			if e.dropped[k] == 0 {
				e.log.Warn("feed: CSV field not in the header is dropped; fix the header with feed.Columns",
					"field", k, "header", strings.Join(header, ","), "file", p.name())
			}
			e.dropped[k]++
		}
	})
}

// neutralise prefixes with a single quote the cells that a spreadsheet
// would run as a formula, unless AllowFormulas.
func (e *Exporter) neutralise(row []string) []string {
	if e.opts.allowFormulas {
		return row
	}
	for i, s := range row {
		if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) && !plainNumber(s) {
			row[i] = "'" + s
		}
	}
	return row
}

// plainNumber reports whether s is a decimal number (sign, digits, point,
// exponent), which no spreadsheet runs as a formula.
func plainNumber(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if intPart == "" && frac == "" || !digits(intPart) || !digits(frac) {
		return false
	}
	if hasExp {
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		return exp != "" && digits(exp)
	}
	return true
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// DroppedFields returns, for each field that CSV items had but the header
// lacked, how many items lost a value to it. It is empty with Columns.
func (e *Exporter) DroppedFields() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.dropped))
	for k, n := range e.dropped {
		out[k] = n
	}
	return out
}

// droppedError is ErrDroppedFields naming the dropped fields, or nil.
func (e *Exporter) droppedError() error {
	if len(e.dropped) == 0 {
		return nil
	}
	names := make([]string, 0, len(e.dropped))
	for k := range e.dropped {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, k := range names {
		names[i] = fmt.Sprintf("%s (%d items)", k, e.dropped[k])
	}
	return fmt.Errorf("%w: %s; the file is complete without them (fix the header with feed.Columns)",
		ErrDroppedFields, strings.Join(names, ", "))
}

// fields reads a JSON object's keys in order and their raw values; a value
// that is not an object is one field named "value".
func fields(data []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return []string{"value"}, map[string]json.RawMessage{"value": data}, nil
	}
	keys := []string{}
	values := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		if _, dup := values[k]; !dup {
			keys = append(keys, k)
		}
		values[k] = raw
	}
	return keys, values, nil
}

// cell writes a JSON value as a CSV cell: strings unquoted, null empty,
// everything else as its JSON text.
func cell(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}
