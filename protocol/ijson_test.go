package protocol

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// The I-JSON rules of CheckJSON (RFC 7493) beyond its table (jsonTextCases): names
// in objects of every size and nesting, where its errors say a fault is, and what
// it costs.

// randomIJSONValue writes a random value into b whose objects take their names from
// a few (so that some repeat), written plainly or with escapes, with as many as
// maxNames members, nested at most depth deep, holding numbers at the edges of a
// double's range.
func randomIJSONValue(r *rand.Rand, b *strings.Builder, depth, maxNames int) {
	names := []string{`a`, `\u0061`, `b`, `\u0062`, `ab`, `a\u0062`, `é`, `\u00e9`, `\ud83d\ude00`, `😀`, `\/`, `/`, ``}
	numbers := []string{`0`, `-1.5`, `1e308`, `1.7976931348623157e308`, `1.7976931348623159e308`, `1e400`, `1e-400`,
		`9007199254740993`, `0.` + strings.Repeat("0", 397) + `1`, `0.` + strings.Repeat("0", 398) + `1`, `2` + strings.Repeat("0", 308)}
	switch k := r.IntN(10); {
	case depth > 0 && k < 3:
		b.WriteByte('{')
		for i := range r.IntN(maxNames + 1) {
			if i > 0 {
				b.WriteByte(',')
			}
			if r.IntN(4) == 0 {
				fmt.Fprintf(b, `"%d"`, r.IntN(4*maxNames+1)) // many names, few of them the same
			} else {
				fmt.Fprintf(b, `"%s"`, names[r.IntN(len(names))])
			}
			b.WriteByte(':')
			randomIJSONValue(r, b, depth-1, maxNames)
		}
		b.WriteByte('}')
	case depth > 0 && k < 5:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomIJSONValue(r, b, depth-1, maxNames)
		}
		b.WriteByte(']')
	case k < 8:
		b.WriteString(numbers[r.IntN(len(numbers))])
	default:
		fmt.Fprintf(b, `"%s"`, names[r.IntN(len(names))])
	}
}

// TestCheckJSONFindsEveryDuplicateNameAndBadNumber holds CheckJSON to the oracle on
// values built to have duplicates: in small objects, compared one by one; in objects
// past 16 names, in a hash set (grown several times); in objects nested past the 8
// CheckJSON keeps without allocating and beyond the 24 names it keeps so; written
// with and without escapes; and with numbers around the largest double.
func TestCheckJSONFindsEveryDuplicateNameAndBadNumber(t *testing.T) {
	r := rand.New(rand.NewPCG(7493, 1))
	refused := map[jsonFault]int{}
	for _, shape := range []struct{ depth, maxNames, n int }{{2, 4, 800}, {4, 6, 150}, {2, 40, 150}, {3, 300, 3}} {
		for range shape.n {
			var b strings.Builder
			randomIJSONValue(r, &b, shape.depth, shape.maxNames)
			checkAgainstReference(t, []byte(b.String()))
			var e *jsonTextError
			if errors.As(CheckJSON([]byte(b.String()), maxJSONNesting), &e) {
				refused[e.fault]++
			} else {
				refused[255]++
			}
		}
	}
	// Each outcome came up often enough to have been tested.
	for _, f := range []jsonFault{jsonDuplicateName, jsonNumberRange, jsonNumberTooLong, 255} {
		if refused[f] < 30 {
			t.Errorf("outcome %d came up %d times: %v", f, refused[f], refused)
		}
	}
}

// TestCheckJSONFindsADuplicateAnywhereInALargeObject puts a second of one name at
// the places that matter (the first, around the 16th, where names go into a hash
// set, the middle, the last) in objects of up to 80 names (the set grows twice),
// plainly and escaped, inside objects nested 12 deep (past the 8 CheckJSON keeps
// without allocating).
func TestCheckJSONFindsADuplicateAnywhereInALargeObject(t *testing.T) {
	const outer = 11
	for size := 2; size <= 80; size++ {
		for _, first := range []int{0, 1, 14, 15, 16, 17, size / 2, size - 3, size - 2} {
			if first < 0 || first > size-2 {
				continue
			}
			for _, escaped := range []bool{false, true} {
				object := func(last string) (doc string, lastAt int) {
					var b strings.Builder
					for range outer {
						b.WriteString(`{"pad":{"x":1,"y":2},"\u006e0":0,"in":`)
					}
					for i := range size {
						b.WriteString(map[bool]string{true: ",", false: "{"}[i > 0])
						name := fmt.Sprintf("n%d", i)
						if i == size-1 {
							name, lastAt = last, b.Len()
						}
						if escaped && i%2 == 1 {
							name = `\u006e` + name[1:]
						}
						fmt.Fprintf(&b, `"%s":{"n0":[%d]}`, name, i)
					}
					b.WriteString(strings.Repeat("}", outer+1))
					return b.String(), lastAt
				}
				doc, at := object(fmt.Sprintf("n%d", first))
				want := fmt.Sprintf("duplicate member name at %sn%d (byte %d)", strings.Repeat("in.", outer), first, at)
				if err := CheckJSON([]byte(doc), MaxJSONDepth); err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("%d names, the last a second n%d (escaped %v): %v, want %q", size, first, escaped, err, want)
				}
				// Without the repeat, the same object is taken.
				if doc, _ := object("last"); CheckJSON([]byte(doc), MaxJSONDepth) != nil {
					t.Fatalf("%d distinct names (escaped %v): %v", size, escaped, CheckJSON([]byte(doc), MaxJSONDepth))
				}
			}
		}
	}
}

func TestCheckJSONErrorsNameThePathAndNeverTheValue(t *testing.T) {
	deep := strings.Repeat(`{"`+strings.Repeat("x", 30)+`":`, 60) + "1e999" + strings.Repeat("}", 60)
	deepPath := strings.Repeat(strings.Repeat("x", 30)+".", 60)
	deepPath = deepPath[len(deepPath)-1-maxPathBytes : len(deepPath)-1]
	for _, tc := range []struct{ in, path string }{
		{`{"a":[{"b":{"c":[0,0,1e400]}}]}`, "a[0].b.c[2]"},
		{`{"a-b_C9":1e400}`, "a-b_C9"},
		{`{"a.b":1e400}`, `["a.b"]`},
		{`{"a\"b\\c":1e400}`, `["a\"b\\c"]`},
		{`{"\u2028":1e400}`, `["\u2028"]`},
		{`{"` + strings.Repeat("é", 50) + `":1e400}`, `["` + strings.Repeat("é", 40) + `"…]`},
		{`{"` + strings.Repeat("k", 5000) + `":1,"` + strings.Repeat("k", 5000) + `":2}`, `["` + strings.Repeat("k", 40) + `"…]`},
		{`{"n":"1e400 is text","m":{},"o":[[],{}],"p":1e400}`, "p"},
		{deep, "…" + deepPath},
		{`[` + strings.Repeat("9", 200000) + `]`, "[0]"},
	} {
		err := CheckJSON([]byte(tc.in), MaxJSONDepth)
		if err == nil || !strings.Contains(err.Error(), " at "+tc.path+" (byte ") {
			t.Errorf("CheckJSON(%.60q) = %v, want the path %s", tc.in, err, tc.path)
			continue
		}
		if len(err.Error()) > 400 || strings.Contains(err.Error(), "99999") || strings.Contains(err.Error(), "1e400") {
			t.Errorf("CheckJSON(%.60q) says %d bytes: %.500s", tc.in, len(err.Error()), err)
		}
	}
}

// TestCheckJSONKeepsNamesWithinAFewTimesTheText bounds what CheckJSON allocates for
// the worst of values for it: one object of distinct short names, all kept in a
// hash set, and many objects each just past the names compared one by one.
func TestCheckJSONKeepsNamesWithinAFewTimesTheText(t *testing.T) {
	var many strings.Builder
	many.WriteByte('[')
	for many.Len() < 1<<20 {
		many.WriteString(`{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,"q":0},`)
	}
	many.WriteString(`{}]`)
	for name, doc := range map[string][]byte{"one object": oneObjectOfNames(1 << 20), "many objects": []byte(many.String())} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := CheckJSON(doc, MaxJSONDepth)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8*uint64(len(doc)) {
			t.Errorf("%s: CheckJSON of %d bytes allocated %d bytes (%.1f times)", name, len(doc), got, float64(got)/float64(len(doc)))
		}
	}
}

// oneObjectOfNames is an object of about size bytes of distinct short names, the
// most names CheckJSON keeps for a text of that size.
func oneObjectOfNames(size int) []byte {
	b := []byte{'{'}
	for i := 0; len(b) < size; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"%x":0`, i)
	}
	return append(b, '}')
}

// TestCheckJSONForgetsTheNamesOfEachObjectThatEnds: objects one after another, of
// a few names or past 16 (whose hash set the next object reuses), with the same
// names, are taken; a name twice in the last is not.
func TestCheckJSONForgetsTheNamesOfEachObjectThatEnds(t *testing.T) {
	for _, n := range []int{3, 16, 17, 40, 200} {
		object := func(repeat bool) string {
			var b strings.Builder
			b.WriteByte('{')
			for i := range n {
				fmt.Fprintf(&b, `"k%d":{"k%d":0},`, i, i)
			}
			if repeat {
				b.WriteString(`"k0":1,`)
			}
			b.WriteString(`"end":0}`)
			return b.String()
		}
		doc := "[" + strings.Repeat(object(false)+",", 4) + object(false) + "]"
		if err := CheckJSON([]byte(doc), MaxJSONDepth); err != nil {
			t.Errorf("5 objects of the same %d names: %v", n, err)
		}
		doc = "[" + strings.Repeat(object(false)+",", 4) + object(true) + "]"
		if err := CheckJSON([]byte(doc), MaxJSONDepth); err == nil || !strings.HasPrefix(err.Error(), "duplicate member name at [4].k0 ") {
			t.Errorf("5 objects of the same %d names, k0 twice in the last: %v", n, err)
		}
	}
}
