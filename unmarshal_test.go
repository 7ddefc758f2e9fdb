package magpie

import (
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"
)

const elemTestProducts = `<html><body>
<div id="umShop" data-open="yes">
  <h1> Shop </h1>
  <p class="count"> 3 </p>
  <p class="rating">4.5</p>
  <p class="stock">-7</p>
  <p class="empty">   </p>
  <time datetime="2024-05-06T07:08:09Z">May 6</time>
  <input type="checkbox" checked>
  <input type="text" value="x" data-max="10">
  <div class="umProduct" data-id=" 11 " data-sale>
    <a href=" /p/11 ">Lamp</a><span class="price">12.50</span><span class="tag">new</span><span class="tag">hot</span>
  </div>
  <div class="umProduct" data-id="12">
    <a href="/p/12">Chair</a><span class="price">40</span>
  </div>
  <ul class="tree">
    <li><span>a</span><ul><li><span>a1</span></li><li><span>a2</span></li></ul></li>
    <li><span>b</span></li>
  </ul>
</div>
</body></html>`

type umProduct struct {
	ID    int      `selector:"" attr:"data-id"`
	Name  string   `selector:"a"`
	URL   string   `selector:"a" attr:"href"`
	Price float64  `selector:".price"`
	Tags  []string `selector:".tag"`
	Sale  bool     `attr:"data-sale"`
}

type umShop struct {
	Title    string       `selector:"h1"`
	Open     string       `attr:"data-open"`
	Count    int          `selector:".count"`
	Rating   float32      `selector:".rating"`
	Stock    int64        `selector:".stock"`
	Max      uint8        `selector:"input[type=text]" attr:"data-max"`
	Checked  bool         `selector:"input[type=checkbox]" attr:"checked"`
	Missing  *int         `selector:".nothing"`
	CountPtr *int         `selector:".count"`
	When     time.Time    `selector:"time" attr:"datetime"`
	WhenPtr  *time.Time   `selector:"time" attr:"datetime"`
	First    umProduct    `selector:".umProduct"`
	FirstPtr *umProduct   `selector:".umProduct"`
	NoneP    *umProduct   `selector:".absent"`
	Products []umProduct  `selector:".umProduct"`
	PtrProds []*umProduct `selector:".umProduct"`
	Prices   []float64    `selector:".price"`
	IDs      []string     `selector:".umProduct" attr:"data-id"`
	Skipped  string       `selector:"-"`
	Untagged string
	Ignored  map[string]string
	private  string `selector:"h1"`
}

func TestUnmarshalHTML(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	v := umShop{Skipped: "keep", Untagged: "keep", private: "keep"}
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	lamp := umProduct{ID: 11, Name: "Lamp", URL: " /p/11 ", Price: 12.5, Tags: []string{"new", "hot"}, Sale: true}
	chair := umProduct{ID: 12, Name: "Chair", URL: "/p/12", Price: 40}
	three := 3
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	want := umShop{
		Title: "Shop", Open: "yes", Count: 3, Rating: 4.5, Stock: -7, Max: 10, Checked: true,
		CountPtr: &three, When: when, WhenPtr: &when,
		First: lamp, FirstPtr: &lamp,
		Products: []umProduct{lamp, chair}, PtrProds: []*umProduct{&lamp, &chair},
		Prices: []float64{12.5, 40}, IDs: []string{" 11 ", "12"},
		Skipped: "keep", Untagged: "keep", private: "keep",
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("Unmarshal() =\n%+v\nwant\n%+v", v, want)
	}
}

type umNamed struct {
	Price  umPrice  `selector:".price"`
	Label  umLabel  `selector:"a"`
	Amount umAmount `selector:".price"`
}

type (
	umPrice  float64
	umLabel  string
	umAmount struct{ cents int64 }
)

func (a *umAmount) UnmarshalText(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	a.cents = int64(f * 100)
	return err
}

func TestUnmarshalNamedTypes(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, ".umProduct")
	var v umNamed
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if want := (umNamed{Price: 12.5, Label: "Lamp", Amount: umAmount{1250}}); v != want {
		t.Errorf("Unmarshal() = %+v, want %+v", v, want)
	}
}

func TestUnmarshalEmptyValuesLeaveFields(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		Empty   int     `selector:".empty"`
		Absent  float64 `selector:".absent"`
		NoAttr  int     `selector:"h1" attr:"data-x"`
		Flag    bool    `selector:".absent" attr:"x"`
		Text    string  `selector:".absent"`
		TextPtr *string `selector:".absent"`
		Ints    []int   `selector:"input" attr:"data-max"`
	}
	v.Empty, v.Absent, v.NoAttr, v.Flag, v.Text = 1, 2, 3, true, "old"
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if v.Empty != 1 || v.Absent != 2 || v.NoAttr != 3 || !v.Flag {
		t.Errorf("Unmarshal() changed fields with nothing to read: %+v", v)
	}
	if v.Text != "" || v.TextPtr != nil {
		t.Errorf("Unmarshal() Text = %q, TextPtr = %v; want \"\" (set as in Colly) and nil", v.Text, v.TextPtr)
	}
	if want := []int{0, 10}; !reflect.DeepEqual(v.Ints, want) {
		t.Errorf("Unmarshal() Ints = %v, want %v (zero for the input without the attribute)", v.Ints, want)
	}
}

func TestUnmarshalSliceReset(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		Kept []string `selector:".absent"`
		Nil  []string `selector:".absent"`
		Full []string `selector:".tag"`
	}
	v.Kept = []string{"old"}
	v.Full = []string{"old", "older", "oldest"}
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if v.Kept == nil || len(v.Kept) != 0 {
		t.Errorf("Kept = %#v, want empty non-nil slice", v.Kept)
	}
	if v.Nil != nil {
		t.Errorf("Nil = %#v, want nil", v.Nil)
	}
	if want := []string{"new", "hot"}; !reflect.DeepEqual(v.Full, want) {
		t.Errorf("Full = %#v, want %#v", v.Full, want)
	}
}

type UmBase struct {
	Title string `selector:"h1"`
}

type umBase struct {
	Count int `selector:".count"`
}

type umEmbedding struct {
	UmBase
	umBase
	Meta struct {
		Rating float64 `selector:".rating"`
	}
}

func TestUnmarshalEmbedded(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v umEmbedding
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if v.Title != "Shop" || v.Count != 3 || v.Meta.Rating != 4.5 {
		t.Errorf("Unmarshal() = %+v, want Title Shop, Count 3, Meta.Rating 4.5 from the same selection", v)
	}
}

type umTreeNode struct {
	Name     string       `selector:"span"`
	Children []umTreeNode `selector:"ul > li"`
}

func TestUnmarshalRecursiveType(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		Roots []umTreeNode `selector:".tree > li"`
	}
	if err := e.Unmarshal(&v); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	want := []umTreeNode{
		{Name: "a", Children: []umTreeNode{{Name: "a1"}, {Name: "a2"}}},
		{Name: "b"},
	}
	if !reflect.DeepEqual(v.Roots, want) {
		t.Errorf("Unmarshal() Roots = %+v, want %+v", v.Roots, want)
	}
}

type umSelfLoop struct {
	Name string      `selector:"h1"`
	Next *umSelfLoop // no selector: the same nodes again, forever
}

func TestUnmarshalErrors(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var notStruct int
	var nilPtr *umShop
	tests := []struct {
		name      string
		v         any
		want      error
		wantField string
	}{
		{"nil", nil, ErrUnmarshalTarget, ""},
		{"non-pointer", umShop{}, ErrUnmarshalTarget, ""},
		{"nil pointer", nilPtr, ErrUnmarshalTarget, ""},
		{"pointer to non-struct", &notStruct, ErrUnmarshalTarget, ""},
		{"unparsable int", &struct {
			N int `selector:"h1"`
		}{}, strconv.ErrSyntax, "N"},
		{"unparsable float is ErrUnmarshalValue", &struct {
			F float64 `selector:"h1"`
		}{}, ErrUnmarshalValue, "F"},
		{"out of range", &struct {
			U uint8 `selector:".count"`
			I int8  `selector:"input[type=text]" attr:"data-max"`
			S int8  `selector:".umProduct" attr:"data-id"`
			B int8  `selector:".stock"`
			R uint  `selector:".stock"`
		}{}, ErrUnmarshalValue, "R"},
		{"unparsable bool", &struct {
			B bool `selector:"h1"`
		}{}, ErrUnmarshalValue, "B"},
		{"unparsable time", &struct {
			T time.Time `selector:"time"`
		}{}, ErrUnmarshalValue, "T"},
		{"error inside a slice element", &struct {
			P []struct {
				N int `selector:"a"`
			} `selector:".umProduct"`
		}{}, ErrUnmarshalValue, "N"},
		{"unsupported tagged type", &struct {
			M map[string]string `selector:"h1"`
		}{}, ErrUnmarshalType, "M"},
		{"unsupported slice of slices", &struct {
			S [][]string `selector:"h1"`
		}{}, ErrUnmarshalType, "S"},
		{"invalid selector tag", &struct {
			S string `selector:"h1[["`
		}{}, ErrUnmarshalSelector, "S"},
		{"self recursion", &umSelfLoop{}, ErrUnmarshalDepth, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Unmarshal(tt.v)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Unmarshal(%T) error = %v, want %v", tt.v, err, tt.want)
			}
			if tt.wantField == "" {
				return
			}
			var ue *UnmarshalError
			if !errors.As(err, &ue) || ue.Field != tt.wantField {
				t.Errorf("Unmarshal(%T) error = %v, want an *UnmarshalError for field %s", tt.v, err, tt.wantField)
			}
		})
	}
}

func TestUnmarshalErrorMessage(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		Count int `selector:"h1"`
	}
	err := e.Unmarshal(&v)
	var ue *UnmarshalError
	if !errors.As(err, &ue) {
		t.Fatalf("Unmarshal() error = %v, want *UnmarshalError", err)
	}
	if ue.Value != "Shop" || ue.Selector != "h1" || ue.Type == nil {
		t.Errorf("UnmarshalError = %+v, want Value Shop, Selector h1 and the struct type", ue)
	}
	const want = `magpie: unmarshal struct { Count int "selector:\"h1\"" } field Count (selector "h1"): ` +
		`cannot parse value: strconv.ParseInt: parsing "Shop": invalid syntax`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestUnmarshalWithMap(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	type target struct {
		Title  string `selector:"h1"`
		Name   string
		Href   string `attr:"href"`
		Count  int
		Rating float64 `selector:".rating"`
		Skip   string  `selector:"-"`
		Bad    string  `selector:"[["` // not used: the map wins
	}
	t.Run("fills only mapped fields", func(t *testing.T) {
		var v target
		err := e.UnmarshalWithMap(&v, map[string]string{
			"Name": ".umProduct a", "Href": ".umProduct a", "Count": ".count", "Skip": "h1", "Bad": "h1", "Rating": "-",
		})
		if err != nil {
			t.Fatalf("UnmarshalWithMap() error = %v", err)
		}
		want := target{Name: "Lamp", Href: " /p/11 ", Count: 3, Skip: "Shop", Bad: "Shop"}
		if v != want {
			t.Errorf("UnmarshalWithMap() = %+v, want %+v", v, want)
		}
	})
	t.Run("empty map fills nothing", func(t *testing.T) {
		var v target
		if err := e.UnmarshalWithMap(&v, map[string]string{}); err != nil || v != (target{}) {
			t.Errorf("UnmarshalWithMap(empty) = %+v, %v; want zero value, nil", v, err)
		}
	})
	t.Run("nil map uses the tags", func(t *testing.T) {
		var v struct {
			Title string `selector:"h1"`
		}
		if err := e.UnmarshalWithMap(&v, nil); err != nil || v.Title != "Shop" {
			t.Errorf("UnmarshalWithMap(nil) = %+v, %v; want Title Shop", v, err)
		}
	})
	errTests := []struct {
		name string
		m    map[string]string
		want error
	}{
		{"unknown field", map[string]string{"Nope": "h1"}, ErrUnmarshalField},
		{"invalid selector", map[string]string{"Title": "h1["}, ErrUnmarshalSelector},
		{"bad value", map[string]string{"Count": "h1"}, ErrUnmarshalValue},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			var v target
			if err := e.UnmarshalWithMap(&v, tt.m); !errors.Is(err, tt.want) {
				t.Errorf("UnmarshalWithMap(%v) error = %v, want %v", tt.m, err, tt.want)
			}
		})
	}
}

func TestUnmarshalHTMLNilSelection(t *testing.T) {
	var v struct {
		Title string   `selector:"h1"`
		N     int      `selector:"p"`
		L     []string `selector:"a"`
	}
	v.Title = "old"
	if err := UnmarshalHTML(&v, nil, nil); err != nil {
		t.Fatalf("UnmarshalHTML(nil selection) error = %v", err)
	}
	if v.Title != "" || v.N != 0 || v.L != nil {
		t.Errorf("UnmarshalHTML(nil selection) = %+v, want zero value", v)
	}
}

func TestUnmarshalConcurrent(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	type fresh struct { // a type no other test has planned yet
		Products []umProduct `selector:".umProduct"`
		Title    string      `selector:"h1"`
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			var v fresh
			if err := e.Unmarshal(&v); err != nil {
				errs <- err
				return
			}
			if len(v.Products) != 2 || v.Title != "Shop" {
				errs <- errors.New("wrong result " + v.Title)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Unmarshal() error = %v", err)
	}
	if _, ok := structPlans.Load(reflect.TypeFor[fresh]()); !ok {
		t.Error("Unmarshal() did not cache the plan for the type")
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	e := newElemTestElement(b, elemTestProducts, "#umShop")
	b.ReportAllocs()
	for b.Loop() {
		var v struct {
			Title    string      `selector:"h1"`
			Count    int         `selector:".count"`
			Products []umProduct `selector:".umProduct"`
		}
		if err := e.Unmarshal(&v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUnmarshalPointerSlices(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		IDs   []*int       `selector:".umProduct" attr:"data-id"`
		Sales []*bool      `selector:".umProduct" attr:"data-sale"`
		Times []time.Time  `selector:"time" attr:"datetime"`
		Names []*string    `selector:".umProduct a"`
		Bad   []*time.Time `selector:"h1"`
	}
	err := e.Unmarshal(&v)
	if !errors.Is(err, ErrUnmarshalValue) {
		t.Fatalf("Unmarshal() error = %v, want %v for Bad", err, ErrUnmarshalValue)
	}
	if len(v.IDs) != 2 || *v.IDs[0] != 11 || *v.IDs[1] != 12 {
		t.Errorf("IDs = %v, want [11 12]", v.IDs)
	}
	if len(v.Sales) != 2 || v.Sales[0] == nil || !*v.Sales[0] || v.Sales[1] != nil {
		t.Errorf("Sales = %v, want [true nil]", v.Sales)
	}
	if len(v.Times) != 1 || v.Times[0].Year() != 2024 {
		t.Errorf("Times = %v, want one 2024 date", v.Times)
	}
	if len(v.Names) != 2 || *v.Names[0] != "Lamp" || *v.Names[1] != "Chair" {
		t.Errorf("Names = %v, want [Lamp Chair]", v.Names)
	}
}

func TestUnmarshalWithMapUnsupportedType(t *testing.T) {
	e := newElemTestElement(t, elemTestProducts, "#umShop")
	var v struct {
		M map[string]int // untagged: fine for Unmarshal, an error when mapped
	}
	if err := e.Unmarshal(&v); err != nil {
		t.Errorf("Unmarshal() error = %v, want nil for an untagged map field", err)
	}
	if err := e.UnmarshalWithMap(&v, map[string]string{"M": "h1"}); !errors.Is(err, ErrUnmarshalType) {
		t.Errorf("UnmarshalWithMap(M) error = %v, want %v", err, ErrUnmarshalType)
	}
}
