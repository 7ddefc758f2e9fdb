package magpie

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// Errors returned by UnmarshalHTML, HTMLElement.Unmarshal and
// HTMLElement.UnmarshalWithMap. All but ErrUnmarshalTarget reach the caller
// inside an *UnmarshalError naming the field; compare with errors.Is.
var (
	// ErrUnmarshalTarget is returned when the value to fill is not a non-nil pointer to a struct.
	ErrUnmarshalTarget = errors.New("unmarshal target is not a non-nil pointer to a struct")
	// ErrUnmarshalType is returned when a field with a selector or attr tag has a type
	// Unmarshal cannot fill (a map, a channel, a slice of slices, ...).
	ErrUnmarshalType = errors.New("unsupported field type")
	// ErrUnmarshalSelector is returned when a selector tag or a structMap entry is not valid CSS.
	ErrUnmarshalSelector = errors.New("invalid CSS selector")
	// ErrUnmarshalValue is returned when the text or attribute found for a number, a bool or
	// an encoding.TextUnmarshaler field does not parse; the parse error is wrapped too.
	ErrUnmarshalValue = errors.New("cannot parse value")
	// ErrUnmarshalField is returned when a structMap key is not an exported field of the struct.
	ErrUnmarshalField = errors.New("no such exported field")
	// ErrUnmarshalDepth is returned when structs nest more than 1000 levels deep, which
	// happens when a struct holds its own type in a field without a selector.
	ErrUnmarshalDepth = errors.New("structs nested too deep")
)

// maxUnmarshalDepth bounds struct recursion. A field of the struct's own type
// whose selector is empty reads the same nodes again and would never stop;
// the bound turns that into an error instead of a stack overflow. Honest
// recursion descends the document and ends long before.
const maxUnmarshalDepth = 1000

// UnmarshalError reports a field that Unmarshal could not fill. Err wraps one
// of the ErrUnmarshal sentinels and, for ErrUnmarshalValue, the parse error.
type UnmarshalError struct {
	// Type is the struct type holding the field.
	Type reflect.Type
	// Field is the Go name of the field, or the structMap key.
	Field string
	// Selector is the CSS selector used for the field, if any.
	Selector string
	// Value is the trimmed text or attribute value that failed to parse.
	Value string
	// Err is the reason.
	Err error
}

// Error describes the field and the reason.
func (e *UnmarshalError) Error() string {
	var b strings.Builder
	b.WriteString("magpie: unmarshal")
	if e.Type != nil {
		b.WriteString(" ")
		b.WriteString(e.Type.String())
	}
	if e.Field != "" {
		b.WriteString(" field ")
		b.WriteString(e.Field)
	}
	if e.Selector != "" {
		fmt.Fprintf(&b, " (selector %q)", e.Selector)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *UnmarshalError) Unwrap() error { return e.Err }

// UnmarshalHTML fills the struct pointed to by v from the nodes of s.
//
// Each exported field is read according to its tags:
//
//   - selector:"css" picks the descendants of s matching css; selector:"-"
//     skips the field; selector:"" (present but empty) means s itself.
//   - attr:"name" reads that attribute instead of the text content.
//
// By field type:
//
//   - string: trimmed text of the first match, or its attribute value as is;
//     "" when nothing matches (the field is always set, as in Colly).
//   - ints, uints, floats, bools and types whose pointer implements
//     encoding.TextUnmarshaler (time.Time, ...): parsed from the trimmed
//     text or attribute of the first match. Nothing found or an empty value
//     leaves the field alone, except that a bool attribute present with an
//     empty value (<input disabled>) is true. A value that does not parse is
//     an error wrapping ErrUnmarshalValue.
//   - struct and *struct: filled recursively from all matches; left alone
//     (nil) when nothing matches. Without any tag the field is filled from s
//     itself, so embedded structs work.
//   - slices of any of these: one element per match, in document order.
//     A missing attribute, or an empty value for a non-string type, gives
//     the zero value (nil for pointers); no match gives an empty slice (nil
//     stays nil).
//   - pointers to any of these: allocated only when something is found.
//
// Fields without tags of other types are skipped; a tagged field of an
// unsupported type is an error wrapping ErrUnmarshalType.
//
// When structMap is non-nil only the fields it names (Go field name → CSS
// selector) are filled, with its selectors in place of the selector tags;
// the attr tags still apply. Naming an unknown field is an error wrapping
// ErrUnmarshalField. A nil s is treated as an empty selection.
//
// Per-type work (tag parsing, selector compiling) is done once and cached,
// so repeated calls cost only the matching. UnmarshalHTML is safe for
// concurrent use.
func UnmarshalHTML(v any, s *goquery.Selection, structMap map[string]string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: got %T", ErrUnmarshalTarget, v)
	}
	var nodes []*html.Node
	if s != nil {
		nodes = s.Nodes
	}
	p := planFor(rv.Elem().Type())
	if structMap != nil {
		return p.fillMapped(rv.Elem(), nodes, structMap)
	}
	return p.fill(rv.Elem(), nodes, 0)
}

// valueKind is how one value is read from a node.
type valueKind uint8

const (
	valString valueKind = iota + 1
	valInt
	valUint
	valFloat
	valBool
	valText
	valStruct
)

// valuePlan describes a Go type Unmarshal can fill from nodes.
type valuePlan struct {
	kind   valueKind
	ptr    bool         // the type is *typ
	typ    reflect.Type // the type, or its element when ptr
	nested *structPlan  // for valStruct
}

// fieldPlan is what the tags of one struct field say, worked out once.
type fieldPlan struct {
	name     string
	index    int
	exported bool
	selector string
	sel      cascadia.Selector // nil: the nodes themselves
	attr     string
	skip     bool // selector "-", or no tags on a non-struct field
	slice    bool
	elem     valuePlan
	typeErr  error // the type is not supported
	tagErr   error // the selector tag does not compile
}

// structPlan is the cached recipe for filling one struct type.
type structPlan struct {
	typ    reflect.Type
	fields []fieldPlan
	byName map[string]int // exported field name → index in fields
}

// structPlans maps a struct reflect.Type to its *structPlan. Plans are
// immutable once stored.
var structPlans sync.Map

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

func planFor(t reflect.Type) *structPlan {
	if p, ok := structPlans.Load(t); ok {
		return p.(*structPlan)
	}
	// Plans under construction live in building so that recursive types
	// resolve to the same plan, and are published only once complete.
	building := make(map[reflect.Type]*structPlan)
	p := buildPlan(t, building)
	for bt, bp := range building {
		structPlans.LoadOrStore(bt, bp)
	}
	return p
}

func buildPlan(t reflect.Type, building map[reflect.Type]*structPlan) *structPlan {
	if p, ok := building[t]; ok {
		return p
	}
	if p, ok := structPlans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{typ: t, byName: make(map[string]int)}
	building[t] = p
	for i := range t.NumField() {
		sf := t.Field(i)
		// Exported fields of an embedded unexported struct are still
		// settable, so such an embedding is filled like an exported one.
		embeddedStruct := sf.Anonymous && sf.Type.Kind() == reflect.Struct
		if !sf.IsExported() && !embeddedStruct {
			continue
		}
		f := fieldPlan{name: sf.Name, index: i, exported: sf.IsExported()}
		selector, hasSelector := sf.Tag.Lookup("selector")
		f.selector = selector
		f.attr = sf.Tag.Get("attr")

		ft := sf.Type
		if ft.Kind() == reflect.Slice {
			f.slice = true
			ft = ft.Elem()
		}
		vp, ok := classify(ft, building)
		f.elem = vp
		if !ok {
			f.typeErr = &UnmarshalError{Type: t, Field: sf.Name, Err: fmt.Errorf("%w %s", ErrUnmarshalType, sf.Type)}
		}
		untagged := !hasSelector && f.attr == ""
		switch {
		case selector == "-":
			f.skip = true
		case untagged:
			// Colly fills an untagged struct from the same selection, which
			// is what makes embedded structs work; anything else untagged is
			// not for Unmarshal.
			f.skip = !ok || vp.kind != valStruct || f.slice
		case selector != "":
			if f.sel = compileSelector(selector); f.sel == nil {
				f.tagErr = &UnmarshalError{Type: t, Field: sf.Name, Selector: selector, Err: ErrUnmarshalSelector}
			}
		}
		if !f.exported && f.skip {
			continue
		}
		if f.exported {
			p.byName[f.name] = len(p.fields)
		}
		p.fields = append(p.fields, f)
	}
	return p
}

// classify reports how values of type t are filled, and false if they cannot be.
func classify(t reflect.Type, building map[reflect.Type]*structPlan) (valuePlan, bool) {
	var vp valuePlan
	if t.Kind() == reflect.Pointer {
		vp.ptr = true
		t = t.Elem()
	}
	vp.typ = t
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		vp.kind = valText
		return vp, true
	}
	switch t.Kind() {
	case reflect.String:
		vp.kind = valString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		vp.kind = valInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		vp.kind = valUint
	case reflect.Float32, reflect.Float64:
		vp.kind = valFloat
	case reflect.Bool:
		vp.kind = valBool
	case reflect.Struct:
		vp.kind = valStruct
		vp.nested = buildPlan(t, building)
	default:
		return vp, false
	}
	return vp, true
}

// fill sets the tagged fields of v, a struct of type p.typ, from nodes.
func (p *structPlan) fill(v reflect.Value, nodes []*html.Node, depth int) error {
	if depth > maxUnmarshalDepth {
		return &UnmarshalError{Type: p.typ, Err: ErrUnmarshalDepth}
	}
	for i := range p.fields {
		f := &p.fields[i]
		if f.skip {
			continue
		}
		if f.typeErr != nil {
			return f.typeErr
		}
		if f.tagErr != nil {
			return f.tagErr
		}
		if err := f.fill(p, v.Field(f.index), nodes, f.sel, f.selector, depth); err != nil {
			return err
		}
	}
	return nil
}

// fillMapped sets the fields named in structMap, in field order so that
// errors do not depend on map iteration order.
func (p *structPlan) fillMapped(v reflect.Value, nodes []*html.Node, structMap map[string]string) error {
	for name := range structMap {
		if _, ok := p.byName[name]; !ok {
			return &UnmarshalError{Type: p.typ, Field: name, Err: ErrUnmarshalField}
		}
	}
	for i := range p.fields {
		f := &p.fields[i]
		selector, ok := structMap[f.name]
		if !f.exported || !ok || selector == "-" {
			continue
		}
		if f.typeErr != nil {
			return f.typeErr
		}
		var sel cascadia.Selector
		if selector != "" {
			if sel = compileSelector(selector); sel == nil {
				return &UnmarshalError{Type: p.typ, Field: f.name, Selector: selector, Err: ErrUnmarshalSelector}
			}
		}
		if err := f.fill(p, v.Field(f.index), nodes, sel, selector, 1); err != nil {
			return err
		}
	}
	return nil
}

// fill sets fv, field f of a p struct, from the descendants of nodes that sel
// matches, or from nodes themselves when sel is nil.
func (f *fieldPlan) fill(p *structPlan, fv reflect.Value, nodes []*html.Node, sel cascadia.Selector, selector string, depth int) error {
	if f.slice {
		return f.fillSlice(p, fv, nodes, sel, selector, depth)
	}
	if f.elem.kind == valStruct {
		matched := nodes
		if sel != nil {
			matched = findAll(nodes, sel)
		}
		if len(matched) == 0 {
			return nil
		}
		target := fv
		if f.elem.ptr {
			if fv.IsNil() {
				fv.Set(reflect.New(f.elem.typ))
			}
			target = fv.Elem()
		}
		return f.elem.nested.fill(target, matched, depth+1)
	}

	var n *html.Node
	if sel != nil {
		n = findFirst(nodes, sel)
	} else if len(nodes) > 0 {
		n = nodes[0]
	}
	raw, found := "", false
	if n != nil {
		raw, found = f.nodeValue(n)
	}
	if f.elem.kind == valString && !f.elem.ptr {
		fv.SetString(raw)
		return nil
	}
	if !found {
		return nil
	}
	s, ok := f.parseable(raw)
	if !ok {
		return nil
	}
	if f.elem.ptr {
		nv := reflect.New(f.elem.typ)
		if err := f.set(p, nv.Elem(), s, selector); err != nil {
			return err
		}
		fv.Set(nv)
		return nil
	}
	return f.set(p, fv, s, selector)
}

func (f *fieldPlan) fillSlice(p *structPlan, fv reflect.Value, nodes []*html.Node, sel cascadia.Selector, selector string, depth int) error {
	matched := nodes
	if sel != nil {
		matched = findAll(nodes, sel)
	}
	if len(matched) == 0 {
		if !fv.IsNil() {
			fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
		}
		return nil
	}
	out := reflect.MakeSlice(fv.Type(), len(matched), len(matched))
	var one [1]*html.Node
	for i, n := range matched {
		ev := out.Index(i)
		if f.elem.kind == valStruct {
			target := ev
			if f.elem.ptr {
				nv := reflect.New(f.elem.typ)
				ev.Set(nv)
				target = nv.Elem()
			}
			one[0] = n
			if err := f.elem.nested.fill(target, one[:], depth+1); err != nil {
				return err
			}
			continue
		}
		raw, found := f.nodeValue(n)
		if !found {
			continue // the zero value (nil for pointers) marks a missing attribute
		}
		s, ok := f.parseable(raw)
		if !ok {
			continue
		}
		target := ev
		if f.elem.ptr {
			nv := reflect.New(f.elem.typ)
			ev.Set(nv)
			target = nv.Elem()
		}
		if err := f.set(p, target, s, selector); err != nil {
			return err
		}
	}
	fv.Set(out)
	return nil
}

// nodeValue returns the trimmed text of n, or the value of the attribute
// named by the attr tag (untrimmed, as Colly gives it) and whether n has it.
func (f *fieldPlan) nodeValue(n *html.Node) (string, bool) {
	if f.attr != "" {
		return attrOf(n.Attr, f.attr)
	}
	return strings.TrimSpace(nodeText(n)), true
}

// parseable turns a found value into the string to set, and reports false
// when the field should be left alone: non-string values that are empty.
func (f *fieldPlan) parseable(raw string) (string, bool) {
	if f.elem.kind == valString {
		return raw, true
	}
	s := strings.TrimSpace(raw)
	if s != "" {
		return s, true
	}
	if f.elem.kind == valBool && f.attr != "" {
		// An HTML boolean attribute is true by being there: <option selected>.
		return "true", true
	}
	return "", false
}

// set parses s into v, which has type f.elem.typ and is addressable.
func (f *fieldPlan) set(p *structPlan, v reflect.Value, s, selector string) error {
	var err error
	switch f.elem.kind {
	case valString:
		v.SetString(s)
	case valInt:
		var x int64
		if x, err = strconv.ParseInt(s, 10, v.Type().Bits()); err == nil {
			v.SetInt(x)
		}
	case valUint:
		var x uint64
		if x, err = strconv.ParseUint(s, 10, v.Type().Bits()); err == nil {
			v.SetUint(x)
		}
	case valFloat:
		var x float64
		if x, err = strconv.ParseFloat(s, v.Type().Bits()); err == nil {
			v.SetFloat(x)
		}
	case valBool:
		var x bool
		if x, err = strconv.ParseBool(s); err == nil {
			v.SetBool(x)
		}
	case valText:
		err = v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	if err != nil {
		return &UnmarshalError{Type: p.typ, Field: f.name, Selector: selector, Value: s,
			Err: fmt.Errorf("%w: %w", ErrUnmarshalValue, err)}
	}
	return nil
}
