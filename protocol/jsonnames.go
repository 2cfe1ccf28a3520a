package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// JSONFields are the member names encoding/json matches to the fields of a
// struct when it decodes a JSON object into it, at every level of the value
// that decodes into a struct (a field of struct type, a list or map of
// them), made by JSONFieldsOf.
//
// encoding/json matches a member to a field by its exact name, or failing
// that by its name folded for case, in Unicode (bytes.EqualFold): it reads
// {"INPUT":"b"} as input "b", and {"input":"a","INPUT":"b"}, I-JSON since
// the names differ, as input "b" too, while JavaScript, Python and every
// reader that compares names as they are read input "a". Check refuses the
// names that would be read so: a proxy, an audit log or the client's own
// code then reads each body agentrt takes as agentrt does.
type JSONFields struct {
	// For an object decoded into a struct: the names of its fields, and
	// what the value of each decodes into (nil: nothing to check in it).
	names  []string
	sums   []uint32 // nameSum of each name: a name of another sum is not it
	values []*JSONFields
	// For an array, or an object decoded into a map: what each element
	// decodes into.
	elem *JSONFields
	kind jsonFieldsKind
}

type jsonFieldsKind uint8

const (
	fieldsStruct jsonFieldsKind = iota
	fieldsArray
	fieldsMap
)

// decodesAsStruct is a type whose UnmarshalJSON decodes a JSON object as
// encoding/json decodes it into the type's own fields (RequestedStep):
// JSONFieldsOf checks its names as a struct's. Any other type with an
// UnmarshalJSON reads its names its own way and is not checked.
type decodesAsStruct interface{ decodesAsStruct() }

var (
	jsonFieldsCache sync.Map // reflect.Type → *JSONFields (nil: nothing to check)
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	asStructType    = reflect.TypeFor[decodesAsStruct]()
)

// JSONFieldsOf is what Check needs to know of t: the fields of the structs
// a JSON value decodes into when it is decoded into a t. Nil when nothing
// in a t is decoded by name (a string, a json.RawMessage, a type with its
// own UnmarshalJSON). It is made with reflection the first time, then kept:
// later calls cost a map lookup. A struct that embeds another is not
// supported (it panics): encoding/json's rules for promoted fields are not
// reproduced here.
func JSONFieldsOf(t reflect.Type) *JSONFields {
	if f, ok := jsonFieldsCache.Load(t); ok {
		return f.(*JSONFields)
	}
	f := jsonFieldsOfType(t, map[reflect.Type]*JSONFields{})
	jsonFieldsCache.Store(t, f)
	return f
}

// jsonFieldsOfType makes JSONFieldsOf(t); seen holds the structs being
// made, so that a type that holds itself ends.
func jsonFieldsOfType(t reflect.Type, seen map[reflect.Type]*JSONFields) *JSONFields {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	ptr := reflect.PointerTo(t)
	if (t.Implements(unmarshalerType) || ptr.Implements(unmarshalerType)) && !ptr.Implements(asStructType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if elem := jsonFieldsOfType(t.Elem(), seen); elem != nil {
			return &JSONFields{kind: fieldsArray, elem: elem}
		}
	case reflect.Map:
		if elem := jsonFieldsOfType(t.Elem(), seen); elem != nil {
			return &JSONFields{kind: fieldsMap, elem: elem}
		}
	case reflect.Struct:
		if f, ok := seen[t]; ok {
			return f
		}
		f := &JSONFields{kind: fieldsStruct}
		seen[t] = f
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Anonymous {
				panic(fmt.Sprintf("protocol.JSONFieldsOf: %s embeds %s: not supported", t, sf.Type))
			}
			if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if !validJSONTag(name) {
				name = sf.Name
			}
			f.names = append(f.names, name)
			f.sums = append(f.sums, nameSum([]byte(name)))
			f.values = append(f.values, jsonFieldsOfType(sf.Type, seen))
		}
		return f
	}
	return nil
}

// validJSONTag is encoding/json's test of a tag's name: one it refuses
// leaves the field its Go name.
func validJSONTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// Check refuses a member name in b that encoding/json would match to a
// field (of a struct f says b decodes into) though it is not the field's
// name: "INPUT" for input, "\u017Fteps" (ſ) for steps. Names that match no
// field are left alone, as encoding/json leaves them. b must be JSON text
// CheckJSON took. The error, fit for a client, names the member, where it
// is and the field it would be read as.
//
// What it costs: one pass over b that reads the names of the objects
// decoded into structs only, and skips every other value from one quote,
// bracket or brace to the next, eight bytes at a time: about 120 ns for a
// create-task body (CheckJSON takes 170), 0.2 ms for a result whose output
// is 1 MiB of text (4 to 5 GB/s) and 2.4 ms for one of 2 MiB of dense JSON
// (0.9 GB/s, as fast as CheckJSON); it allocates nothing unless it returns
// an error (BenchmarkCheckJSONFields, on a busy 2-core AMD EPYC). Where the
// text is being checked anyway, CheckJSONFields does it in the same pass.
func (f *JSONFields) Check(b []byte) error {
	if f == nil {
		return nil
	}
	i := skipJSONSpace(b, 0)
	if i == len(b) {
		return nil
	}
	_, err := f.checkValue(b, i)
	return err
}

// checkValue checks the value at b[i], which decodes into what f says,
// and returns the offset just past it.
func (f *JSONFields) checkValue(b []byte, i int) (int, error) {
	switch {
	case f == nil:
		return skipJSONValue(b, i), nil
	case b[i] == '{' && f.kind != fieldsArray:
		return f.checkObject(b, i)
	case b[i] == '[' && f.kind == fieldsArray:
		return f.elem.checkArray(b, i)
	}
	return skipJSONValue(b, i), nil // decoding will refuse it
}

// checkArray checks the array at b[i] ('['), whose elements decode into
// what f says, and returns the offset just past it.
func (f *JSONFields) checkArray(b []byte, i int) (int, error) {
	i = skipJSONSpace(b, i+1)
	if b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = f.checkValue(b, i); err != nil {
			return 0, err
		}
		i = skipJSONSpace(b, i)
		if b[i] == ']' {
			return i + 1, nil
		}
		i = skipJSONSpace(b, i+1) // past ','
	}
}

// checkObject checks the object at b[i] ('{'), decoded into a struct or a
// map as f says, and returns the offset just past it.
func (f *JSONFields) checkObject(b []byte, at int) (int, error) {
	var buf [64]byte
	i := skipJSONSpace(b, at+1)
	if b[i] == '}' {
		return i + 1, nil
	}
	for {
		end, escapes := skipJSONStringEscapes(b, i)
		name := b[i+1 : end-1]
		if escapes {
			name = appendUnescaped(buf[:0], name)
		}
		value := f.elem // a map's
		if f.kind == fieldsStruct {
			k, exact := f.field(name, nameSum(name))
			if k >= 0 && !exact {
				return 0, &JSONNameError{Name: string(name), Field: f.names[k], Path: jsonPathAt(b, at)}
			}
			if value = nil; k >= 0 {
				value = f.values[k]
			}
		}
		i = skipJSONSpace(b, end)
		i = skipJSONSpace(b, i+1) // past ':'
		var err error
		if i, err = value.checkValue(b, i); err != nil {
			return 0, err
		}
		i = skipJSONSpace(b, i)
		if b[i] == '}' {
			return i + 1, nil
		}
		i = skipJSONSpace(b, i+1) // past ','
	}
}

// field is the index of the field encoding/json matches name, whose
// nameSum is sum, to, -1 for none, and whether name is that field's
// exactly: as encoding/json does, the field of that exact name, else the
// first whose name folds to it.
func (f *JSONFields) field(name []byte, sum uint32) (k int, exact bool) {
	for k, s := range f.sums {
		if s == sum && f.names[k] == string(name) {
			return k, true
		}
	}
	for k, n := range f.names {
		if bytes.EqualFold(name, []byte(n)) {
			return k, false
		}
	}
	return -1, false
}

// JSONNameError is Check's error, and CheckJSONFields': Name, a member of
// the object at Path ("" for the value itself), would be read as Field.
// Its text is fit for a client.
type JSONNameError struct {
	Name, Field, Path string
}

func (e *JSONNameError) Error() string {
	const rule = "member names are case-sensitive"
	// %+q writes what is not ASCII as escapes: "\u017fteps" shows how it differs.
	if e.Path == "" {
		return fmt.Sprintf("%+q: %s; did you mean %q?", e.Name, rule, e.Field)
	}
	return fmt.Sprintf("%+q in %s: %s; did you mean %q?", e.Name, e.Path, rule, e.Field)
}

// jsonFieldsTrack is what CheckJSONFields keeps to check member names: the
// open containers that decode by fields, which are always the outermost
// ones (inside a value nothing is checked in, nothing is).
type jsonFieldsTrack struct {
	n      int // containers 1 to n, counted from the outermost, decode by fields
	levels [8]jsonFieldsLevel
	more   []jsonFieldsLevel // levels past len(levels)
	// next is what the value about to start decodes into: nil for nothing
	// checked, and always nil inside a container that is not followed.
	next *JSONFields
}

// jsonFieldsLevel is an open container that decodes by fields.
type jsonFieldsLevel struct {
	fields *JSONFields
	at     int // the offset of its '{' or '['
}

// top is the innermost container followed.
func (t *jsonFieldsTrack) top() *jsonFieldsLevel {
	if t.n <= len(t.levels) {
		return &t.levels[t.n-1]
	}
	return &t.more[t.n-1-len(t.levels)]
}

// open follows the container c ('{' or '[') at b[at], the value t.next
// decodes into, if it is of the kind t.next says: a value of another kind
// is refused by decoding, and nothing in it is checked.
func (t *jsonFieldsTrack) open(c byte, at int) {
	f := t.next
	t.next = nil
	if (c == '[') != (f.kind == fieldsArray) {
		return
	}
	l := jsonFieldsLevel{fields: f, at: at}
	if t.n < len(t.levels) {
		t.levels[t.n] = l
	} else {
		t.more = appendDoubling(t.more[:t.n-len(t.levels)], l)
	}
	t.n++
	if c == '[' {
		t.element()
	}
}

// close forgets the container at depth if it is followed.
func (t *jsonFieldsTrack) close(depth int) {
	if depth == t.n {
		t.n--
	}
}

// element starts an element of the innermost array followed.
func (t *jsonFieldsTrack) element() {
	t.next = t.top().fields.elem
}

// member checks name, whose nameSum is sum, that of a member of the
// innermost object followed, whose value starts next.
func (t *jsonFieldsTrack) member(b []byte, name []byte, sum uint32) error {
	l := t.top()
	f := l.fields
	if f.kind == fieldsMap {
		t.next = f.elem
		return nil
	}
	k, exact := f.field(name, sum)
	switch {
	case k < 0:
		t.next = nil
	case !exact:
		return &JSONNameError{Name: string(name), Field: f.names[k], Path: jsonPathAt(b, l.at)}
	default:
		t.next = f.values[k]
	}
	return nil
}

// skipJSONStringEscapes returns the offset just past the string whose
// opening quote is b[i], in JSON text CheckJSON took, and whether it has
// escapes.
func skipJSONStringEscapes(b []byte, i int) (int, bool) {
	escapes := false
	i++
	for {
		i = skipWords(b, i, quotesOrBackslashes)
		switch b[i] {
		case '"':
			return i + 1, escapes
		case '\\':
			escapes = true
			i += 2 // \uXXXX: its hex digits are neither '"' nor '\'
		default:
			i++ // only past the last whole word
		}
	}
}

// skipJSONValue returns the offset just past the value at b[i], in JSON
// text CheckJSON took.
func skipJSONValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := skipJSONStringEscapes(b, i)
		return end
	case '{', '[':
	default: // a number or a literal: it ends at a delimiter or the end
		for i < len(b) && !jsonDelimiter[b[i]] {
			i++
		}
		return i
	}
	depth := 0
	for {
		i = skipWords(b, i, jsonStructurals)
		switch b[i] {
		case '"':
			i, _ = skipJSONStringEscapes(b, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
}

// skipWords returns the offset of the first byte at or after b[i] that
// marks, eight bytes at a time; in the last seven bytes of b, i.
func skipWords(b []byte, i int, marks func(uint64) uint64) int {
	for i+8 <= len(b) {
		if m := marks(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// jsonDelimiter[c] is whether c ends a number or a literal.
var jsonDelimiter = func() (d [256]bool) {
	for _, c := range []byte(",]} \t\r\n") {
		d[c] = true
	}
	return d
}()

// quotesOrBackslashes marks the bytes of w (read little-endian) that are
// '"' or '\\': the lowest bit set is in the first of them, exactly (above
// it, a mark may be false). The test is haszero of "Bit Twiddling Hacks",
// as in hasJSONSpecial.
func quotesOrBackslashes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, s := w^(ones*'"'), w^(ones*'\\')
	return ((q-ones)&^q | (s-ones)&^s) & highs
}

// jsonStructurals marks as quotesOrBackslashes does the bytes of w that
// are '"', '{', '}', '[' or ']': with bit 0x20 set, '[' is '{' and ']' is
// '}', and no other byte becomes either.
func jsonStructurals(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	lw := w | ones*0x20
	q, o, c := w^(ones*'"'), lw^(ones*'{'), lw^(ones*'}')
	return ((q-ones)&^q | (o-ones)&^o | (c-ones)&^c) & highs
}
