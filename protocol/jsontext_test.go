package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonTextCases pins each rule CheckJSON enforces, at MaxJSONDepth: err is "" for a
// value it must accept, else a substring its error must contain. They also seed
// FuzzCheckJSON.
var jsonTextCases = []struct{ in, err string }{
	// Scalars, whitespace, strings, containers.
	{`0`, ""},
	{`-0`, ""},
	{`-0.0e+0`, ""},
	{`1E10`, ""},
	{`123.456e-789`, ""},
	{`-1.5E+308`, ""},
	{" \t\n\r 1 \r\n\t ", ""},
	{`true`, ""},
	{`false`, ""},
	{`null`, ""},
	{`""`, ""},
	{`"\"\\\/\b\f\n\r\t\u00e9\u0000\u001F"`, ""},
	{"\"/ and DEL \x7f stand for themselves\"", ""},
	{`"日本語 résumé 😀"`, ""},
	{"\"\xef\xbf\xbd\"", ""}, // U+FFFD written out
	{`"\ufffd\uFFFD"`, ""},
	{`"\ud83d\ude00 \uD83D\uDE00"`, ""}, // a surrogate pair, in either case
	{`"\ud800\udc00\udbff\udfff"`, ""},  // the lowest and highest pairs
	{`"\\ud800"`, ""},                   // an escaped backslash, then text
	{`{}`, ""},
	{`[]`, ""},
	{" { } ", ""},
	{"[ \n]", ""},
	{`{"a":[1,{"b":null}],"c":true,"d":false,"e":"x"}`, ""},
	{` { "a" : [ 1 , 2 ] , "b" : { } } `, ""},
	{strings.Repeat("[", 100) + strings.Repeat("]", 100), ""},
	{strings.Repeat(`{"a":`, 99) + `{}` + strings.Repeat("}", 99), ""},

	// Nothing, or more than one value.
	{``, "no JSON value"},
	{" \t\r\n", "no JSON value"},
	{`1 2`, "data after the JSON value at byte 2"},
	{`{}x`, "data after the JSON value at byte 2"},
	{`[]]`, "data after the JSON value at byte 2"},
	{`"a""b"`, "data after the JSON value at byte 3"},
	{`nulll`, "data after the JSON value at byte 4"},
	{`0x1`, "data after the JSON value at byte 1"},
	{`1.5.5`, "data after the JSON value at byte 3"},

	// UTF-8, in strings and out of them.
	{"\"\xff\"", "invalid UTF-8 at byte 1"},
	{"\"ab\xfe\"", "invalid UTF-8 at byte 3"},
	{"\"\x80\"", "invalid UTF-8 at byte 1"},             // a continuation byte alone
	{"\"\xc0\xaf\"", "invalid UTF-8 at byte 1"},         // '/' in two bytes (overlong)
	{"\"\xed\xa0\x80\"", "invalid UTF-8 at byte 1"},     // U+D800 encoded as UTF-8
	{"\"\xf4\x90\x80\x80\"", "invalid UTF-8 at byte 1"}, // above U+10FFFF
	{"\"\xe6\x97\"", "invalid UTF-8 at byte 1"},         // 日 cut short
	{"\"\xe6\x97", "invalid UTF-8 at byte 1"},
	{"{\"a\xff\":1}", "invalid UTF-8 at byte 3"},
	{"\xff", "invalid UTF-8 at byte 0"},
	{"[1,\xfe]", "invalid UTF-8 at byte 3"},
	{"\"ok\" \xc0", "invalid UTF-8 at byte 5"},
	{"é", "malformed JSON at byte 0: expected a value, found 'é'"},
	{"\xef\xbb\xbf{}", "malformed JSON at byte 0: expected a value, found U+FEFF"}, // a byte order mark

	// Lone surrogates.
	{`"\ud800"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\uDBFF"`, `a \u escape at byte 1 is a lone surrogate (\uDBFF)`},
	{`"\udc00"`, `a \u escape at byte 1 is a lone surrogate (\udc00)`},
	{`"\udc00\udc00"`, `a \u escape at byte 1 is a lone surrogate (\udc00)`}, // two lows are no pair
	{`"\ud800\u0041"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\ud800\ud800\udc00"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\ud800x"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\ud800\n"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\ud800\u12"`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"\ud800`, `a \u escape at byte 1 is a lone surrogate (\ud800)`},
	{`"ok\udc00\ud800"`, `a \u escape at byte 3 is a lone surrogate (\udc00)`}, // a pair in the wrong order
	{`"\ud83d\ude00\udfff"`, `a \u escape at byte 13 is a lone surrogate (\udfff)`},
	{`{"\ud800":1}`, `a \u escape at byte 2 is a lone surrogate (\ud800)`},

	// Control characters in strings.
	{"\"a\x00\"", "malformed JSON at byte 2: unescaped control character U+0000 in a string"},
	{"\"\n\"", "malformed JSON at byte 1: unescaped control character U+000A in a string"},
	{"\"\t\"", "malformed JSON at byte 1: unescaped control character U+0009 in a string"},
	{"\"\x1f\"", "malformed JSON at byte 1: unescaped control character U+001F in a string"},
	{"{\"\r\":1}", "malformed JSON at byte 2: unescaped control character U+000D in a string"},

	// Numbers.
	{`01`, "malformed JSON at byte 1: expected no digit after a leading 0, found '1'"},
	{`-01`, "malformed JSON at byte 2: expected no digit after a leading 0, found '1'"},
	{`[00]`, "malformed JSON at byte 2: expected no digit after a leading 0, found '0'"},
	{`+1`, "malformed JSON at byte 0: expected a value, found '+'"},
	{`.5`, "malformed JSON at byte 0: expected a value, found '.'"},
	{`-`, "malformed JSON at byte 1: expected a digit after '-', found the end of the input"},
	{`--1`, "malformed JSON at byte 1: expected a digit after '-', found '-'"},
	{`-Infinity`, "malformed JSON at byte 1: expected a digit after '-', found 'I'"},
	{`NaN`, "malformed JSON at byte 0: expected a value, found 'N'"},
	{`1.`, "malformed JSON at byte 2: expected a digit after '.', found the end of the input"},
	{`1.e5`, "malformed JSON at byte 2: expected a digit after '.', found 'e'"},
	{`1e`, "malformed JSON at byte 2: expected a digit in the exponent, found the end of the input"},
	{`1e+`, "malformed JSON at byte 3: expected a digit in the exponent, found the end of the input"},
	{`1E-x`, "malformed JSON at byte 3: expected a digit in the exponent, found 'x'"},

	// Literals.
	{`tru`, "malformed JSON at byte 3: expected the literal true, found the end of the input"},
	{`nul`, "malformed JSON at byte 3: expected the literal null, found the end of the input"},
	{`fals3`, "malformed JSON at byte 4: expected the literal false, found '3'"},
	{`[nulx]`, "malformed JSON at byte 4: expected the literal null, found 'x'"},
	{`True`, "malformed JSON at byte 0: expected a value, found 'T'"},

	// Strings and escapes.
	{`"abc`, `malformed JSON at byte 4: expected '"' to end the string, found the end of the input`},
	{`"\x"`, `malformed JSON at byte 2: expected one of " \ / b f n r t u after '\', found 'x'`},
	{`"\'"`, `malformed JSON at byte 2: expected one of " \ / b f n r t u after '\', found '\''`},
	{`"\U0041"`, `malformed JSON at byte 2: expected one of " \ / b f n r t u after '\', found 'U'`},
	{`"\`, `malformed JSON at byte 2: expected one of " \ / b f n r t u after '\', found the end of the input`},
	{`"\u12"`, `malformed JSON at byte 5: expected four hex digits after \u, found '"'`},
	{`"\u12g4"`, `malformed JSON at byte 5: expected four hex digits after \u, found 'g'`},
	{`'a'`, `malformed JSON at byte 0: expected a value, found '\''`},

	// Arrays and objects.
	{`[1,]`, "malformed JSON at byte 3: expected a value, found ']'"},
	{`[,1]`, "malformed JSON at byte 1: expected a value, found ','"},
	{`[1 2]`, "malformed JSON at byte 3: expected ',' or ']', found '2'"},
	{`[1}`, "malformed JSON at byte 2: expected ',' or ']', found '}'"},
	{`{"a":1]`, "malformed JSON at byte 6: expected ',' or '}', found ']'"},
	{`{"a":1 "b":2}`, `malformed JSON at byte 7: expected ',' or '}', found '"'`},
	{`{"a":1,}`, "malformed JSON at byte 7: expected a string as an object key, found '}'"},
	{`{,}`, "malformed JSON at byte 1: expected a string as an object key, found ','"},
	{`{a:1}`, "malformed JSON at byte 1: expected a string as an object key, found 'a'"},
	{`{1:1}`, "malformed JSON at byte 1: expected a string as an object key, found '1'"},
	{`{"a" 1}`, "malformed JSON at byte 5: expected ':' after an object key, found '1'"},
	{`{"a"}`, "malformed JSON at byte 4: expected ':' after an object key, found '}'"},
	{`[`, "malformed JSON at byte 1: expected a value, found the end of the input"},
	{`{`, "malformed JSON at byte 1: expected a string as an object key, found the end of the input"},
	{`{"a":`, "malformed JSON at byte 5: expected a value, found the end of the input"},
	{`[1`, "malformed JSON at byte 2: expected ',' or ']', found the end of the input"},
	{`{"a":1`, "malformed JSON at byte 6: expected ',' or '}', found the end of the input"},
	{`]`, "malformed JSON at byte 0: expected a value, found ']'"},
	{`[{]}`, "malformed JSON at byte 2: expected a string as an object key, found ']'"},
	{`[{}}`, "malformed JSON at byte 3: expected ',' or ']', found '}'"},

	// Whitespace is space, tab, LF and CR only.
	{"\v1", "malformed JSON at byte 0: expected a value, found U+000B"},
	{"\f1", "malformed JSON at byte 0: expected a value, found U+000C"},
	{"\u00a01", "malformed JSON at byte 0: expected a value, found U+00A0"},
	{"[1,\u30002]", "malformed JSON at byte 3: expected a value, found U+3000"},

	// Nesting.
	{strings.Repeat("[", 101) + strings.Repeat("]", 101), "nested deeper than 100 levels at byte 100"},
	{strings.Repeat(`{"a":`, 101) + "1" + strings.Repeat("}", 101), "nested deeper than 100 levels at byte 500"},

	// I-JSON (RFC 7493): numbers a double holds, of a bounded length.
	{`1.7976931348623157e308`, ""}, // the largest double
	{`-1.7976931348623157e308`, ""},
	{`1.7976931348623158e308`, ""}, // rounds down to it, in every reader
	{`[179769313486231570e291]`, ""},
	{`0.0017976931348623157e311`, ""},
	{`1.7976931348623159e308`, "number out of range at the top level (byte 0)"}, // rounds to Infinity
	{`1.8e308`, "number out of range at the top level (byte 0)"},
	{`-1e400`, "number out of range at the top level (byte 0)"},
	{`[0, 1e400]`, "number out of range at [1] (byte 4)"},
	{`{"a":{"b":[1,2,3,-1.8E+308]}}`, "number out of range at a.b[3] (byte 17)"},
	{`10e308`, "number out of range"},
	{`1e99999999999`, "number out of range"}, // an exponent past any integer type
	{`1e` + strings.Repeat("9", 398), "number out of range"},
	{`0.001e312`, "number out of range"},
	{`1e-400`, ""}, // underflows to 0, alike in every reader
	{`-1e-400`, ""},
	{`4.9e-324`, ""}, // the smallest subnormal
	{`1e-99999999999`, ""},
	{`0e99999999999`, ""}, // zero, whatever the exponent
	{`-0.000e400`, ""},
	{`9007199254740993`, ""},                              // past 2^53: doubles round it, integer readers keep it
	{`-123456789012345678901234567890123456789`, ""},      // so past 2^64
	{`1` + strings.Repeat("0", 308), ""},                  // 1e308 written out
	{`-17976931348623157` + strings.Repeat("0", 292), ""}, // the largest double written out, as C's %f writes it
	{`-17976931348623159` + strings.Repeat("0", 292), "number out of range at the top level (byte 0)"},
	{`[2` + strings.Repeat("0", 308) + `]`, "number out of range at [0] (byte 1)"},
	{`[1` + strings.Repeat("0", 308) + `.5]`, ""},
	{`-0.` + strings.Repeat("0", 323) + `5`, ""}, // 5e-324 written out, as Rust's Display writes it
	{`-0.` + strings.Repeat("0", 396) + `1`, ""}, // 400 bytes
	{`0.` + strings.Repeat("0", 398) + `1`, "number too long at the top level (byte 0): 401 bytes, over the 400 a number may take"},
	{`{"n":-` + strings.Repeat("7", 100000) + `}`, "number too long at n (byte 5): 100001 bytes"},
	{`1.` + strings.Repeat("5", 397) + `e1`, "number too long"},
	{`1e` + strings.Repeat("0", 399), "number too long"},

	// I-JSON: member names unique within an object, compared as decoded.
	{`{"a":1,"a":2}`, "duplicate member name at a (byte 7)"},
	{`{"a":1,"\u0061":2}`, "duplicate member name at a (byte 7)"},
	{`{"\u0061":1,"a":2}`, "duplicate member name at a (byte 12)"},
	{`{"a\/b":1,"a/b":2}`, `duplicate member name at ["a/b"] (byte 10)`},
	{`{"é":1,"\u00E9":2}`, `duplicate member name at ["é"] (byte 8)`},
	{`{"\ud83d\ude00":1,"😀":2}`, `duplicate member name at ["😀"] (byte 18)`},
	{`{"\n":1,"\u000a":2}`, `duplicate member name at ["\n"] (byte 8)`},
	{`{"":1,"":2}`, `duplicate member name at [""] (byte 6)`},
	{`{"a":{},"a":{}}`, "duplicate member name at a (byte 8)"},
	{`{"a":{"b":[1,{"c":null,"d":0,"c":true}]}}`, "duplicate member name at a.b[1].c (byte 29)"},
	{`{"x":"[,{\"","y":{"z":0,"z":0}}`, "duplicate member name at y.z (byte 24)"},
	{`{"a b":[{"k":1,"k":2}]}`, `duplicate member name at ["a b"][0].k (byte 15)`},
	{`{"a":1,"b":2,"a":3}`, "duplicate member name at a (byte 13)"},
	{`{"A":1,"a":2}`, ""},             // names differ in case
	{`{"é":1,"e\u0301":2}`, ""},       // nor normalized: é and e + U+0301 differ
	{`{"a":{"x":1},"b":{"x":1}}`, ""}, // names of different objects
	{`[{"a":1},{"a":1}]`, ""},         // objects in an array
	{`{"a":{"a":{"a":1}},"b":{"a":2}}`, ""},
	{`{"ab":1,"a":2,"b":3,"\u0062a":4}`, ""},
	{`{"a":1,"a":2`, "duplicate member name at a (byte 7)"}, // before the text ends
	{`{"a":1,"a"}`, "duplicate member name at a (byte 7)"},  // before the colon it lacks
}

func TestCheckJSON(t *testing.T) {
	for _, tc := range jsonTextCases {
		err := CheckJSON([]byte(tc.in), MaxJSONDepth)
		if tc.err == "" {
			if err != nil {
				t.Errorf("CheckJSON(%.80q) = %v, want nil", tc.in, err)
			}
			continue
		}
		var e *jsonTextError
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("CheckJSON(%.80q) = %v, want an error with %q", tc.in, err, tc.err)
		}
	}
}

// nestedJSON returns a value nested depth deep, arrays and objects taking turns so
// that a close bracket of the wrong kind at any level would be noticed, and the offset
// of its innermost open bracket (-1 for depth 0).
func nestedJSON(depth int) (doc string, innermost int) {
	var b strings.Builder
	innermost = -1
	for d := range depth {
		innermost = b.Len()
		if d%3 == 1 {
			b.WriteString(`{"k":`)
		} else {
			b.WriteString(`[0,`)
		}
	}
	b.WriteString(`"x"`)
	for d := depth - 1; d >= 0; d-- {
		if d%3 == 1 {
			b.WriteString(`}`)
		} else {
			b.WriteString(`]`)
		}
	}
	return b.String(), innermost
}

func TestCheckJSONDepthLimit(t *testing.T) {
	// Words of the bit stack end at 64, 128, ... 10000 is the most CheckJSON follows.
	for _, tc := range []struct{ maxDepth, effective int }{
		{-5, 0}, {0, 0}, {1, 1}, {3, 3}, {63, 63}, {64, 64}, {65, 65}, {MaxJSONDepth, MaxJSONDepth},
		{129, 129}, {maxJSONNesting, maxJSONNesting}, {20000, maxJSONNesting},
	} {
		atLimit, _ := nestedJSON(tc.effective)
		if err := CheckJSON([]byte(atLimit), tc.maxDepth); err != nil {
			t.Errorf("maxDepth %d: nesting %d deep was refused: %v", tc.maxDepth, tc.effective, err)
		}
		over, at := nestedJSON(tc.effective + 1)
		want := fmt.Sprintf("nested deeper than %d levels at byte %d", tc.effective, at)
		if err := CheckJSON([]byte(over), tc.maxDepth); err == nil || err.Error() != want {
			t.Errorf("maxDepth %d: nesting %d deep gave %v, want %q", tc.maxDepth, tc.effective+1, err, want)
		}
		// Close the innermost array with '}' or the innermost object with ']'.
		if tc.effective > 0 {
			i := strings.Index(atLimit, `"x"`) + len(`"x"`)
			wrong := atLimit[:i] + map[byte]string{']': "}", '}': "]"}[atLimit[i]] + atLimit[i+1:]
			want := fmt.Sprintf("malformed JSON at byte %d: expected ',' or '%c'", i, atLimit[i])
			if err := CheckJSON([]byte(wrong), tc.maxDepth); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("maxDepth %d: the wrong innermost close bracket gave %v, want %q", tc.maxDepth, err, want)
			}
		}
	}
}

// stepOutput returns a JSON object of about size bytes, shaped like
// a plugin's additional_output as json.Marshal writes it: records with ASCII and
// non-ASCII text, escapes, numbers, booleans and nulls.
func stepOutput(size int) []byte {
	b := []byte(`{"model":"agentrt-test","messages":[`)
	for n := 0; len(b) < size-300; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"role":"assistant","content":"Step %d finished: wrote report.md (%d bytes) `+
			`and résumé_日本語.txt; the tool said \"ok\"\nnext: review \u003cdiff\u003e","usage":{"prompt":%d,"completion":%d},`+
			`"score":%g,"tags":["fs","write",null],"final":%t}`,
			n, n, 1000+n*37, 512+n, 64+n%17, float64(n)*0.125-3.5e-3, n%2 == 0)
	}
	return append(b, `]}`...)
}

func TestCheckJSONAllocatesNothing(t *testing.T) {
	doc := stepOutput(4 << 10)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := CheckJSON(doc, MaxJSONDepth); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("CheckJSON of a valid 4 KiB object allocates %v times", allocs)
	}
}

func TestHasJSONSpecialFindsEveryByteAnywhere(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			word := []byte("plainASC")
			word[pos] = byte(c)
			w := uint64(0)
			for i := 7; i >= 0; i-- {
				w = w<<8 | uint64(word[i])
			}
			if got := hasJSONSpecial(w); got == plainInJSONString[c] {
				t.Errorf("byte %#02x at %d: hasJSONSpecial = %v", c, pos, got)
			}
		}
	}
}

// jsonMutationBase exercises every part of the grammar; TestCheckJSONAgreesWithEncodingJSON
// cuts it short and breaks it byte by byte.
const jsonMutationBase = `{"a":[1,-2.5e+3,0,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"],` +
	`"日本":{"k":[],"l":{}}, "z" : "\ufffd` + "\xef\xbf\xbd" + `\udbff\udfff" }`

// ijsonMutationBase is I-JSON with names one byte from each other and numbers one
// digit from the largest double (with and without an exponent), from 2^53 and from
// the longest number: cut short and broken byte by byte, it makes duplicates and
// numbers out of range or too long.
var ijsonMutationBase = `{"e":[1.7976931348623157e308,9007199254740993,1e-400,` +
	"-0." + strings.Repeat("0", 396) + "1," + "17976931348623157" + strings.Repeat("0", 292) + "]," +
	`"u":{"e":0,"0":{},"eu":1,"\u0075e":2,"-":{}},"0e":{}, "ue" :0}`

func TestCheckJSONAgreesWithEncodingJSON(t *testing.T) {
	inputs := [][]byte{}
	for _, tc := range jsonTextCases {
		inputs = append(inputs, []byte(tc.in))
	}
	for _, base := range []string{jsonMutationBase, ijsonMutationBase} {
		if err := CheckJSON([]byte(base), MaxJSONDepth); err != nil {
			t.Fatalf("CheckJSON(%q) = %v", base, err)
		}
		inputs = append(inputs, mutationsOf(base)...)
	}
	for _, in := range inputs {
		checkAgainstReference(t, in)
	}
}

// mutationsOf is base cut short at each byte, and with each byte taken out, replaced
// and preceded by each of a few strays.
func mutationsOf(base string) [][]byte {
	var inputs [][]byte
	for i := range len(base) + 1 {
		inputs = append(inputs, []byte(base[:i]), []byte(base[:i]+base[min(i+1, len(base)):]))
		const strays = "\"\\[]{}:,0-e.u \x00\x1f\x7f\xff\xc3\xed"
		for k := range len(strays) {
			inputs = append(inputs, []byte(base[:i]+strays[k:k+1]+base[i:]))
			if i < len(base) {
				inputs = append(inputs, []byte(base[:i]+strays[k:k+1]+base[i+1:]))
			}
		}
	}
	return inputs
}

// FuzzCheckJSON checks that CheckJSON accepts exactly what encoding/json,
// unicode/utf8 and strconv say it should (I-JSON: no duplicate names, no number
// that is ±Inf as a double or longer than MaxJSONNumberBytes), that encoding/json
// decodes what it accepts into an any, and that it refuses the rest at the right
// byte and for the right reason.
func FuzzCheckJSON(f *testing.F) {
	for _, tc := range jsonTextCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(jsonMutationBase))
	f.Add([]byte(ijsonMutationBase))
	f.Fuzz(checkAgainstReference)
}

// jsonReference is what encoding/json, unicode/utf8 and strconv say about a text,
// worked out without any of CheckJSON's code.
type jsonReference struct {
	ok        bool   // one I-JSON value (nested at most 10000 deep): valid UTF-8, no lone surrogate, no duplicate name, numbers a double holds
	refused   bool   // json.Unmarshal refuses it
	syntaxAt  int    // the first byte json.Unmarshal refuses, len(b) for the end; -1 for none, or where its offsets do not say (jsonOffsetsV1)
	syntaxMsg string // and what it says there
	utf8At    int    // the first byte that is not UTF-8; -1 for none
	depth     int    // if ok, how deeply arrays and objects nest
	fourthAt  int    // if ok, the offset of the first bracket that opens a fourth level; -1 for none

	// The first number or member name of the value that I-JSON refuses, in the text
	// before json.Unmarshal refuses anything; -1 for none.
	ijsonAt    int
	ijsonFault jsonFault
}

func referenceJSON(t *testing.T, b []byte) jsonReference {
	t.Helper()
	ref := jsonReference{syntaxAt: -1, utf8At: -1, fourthAt: -1, ijsonAt: -1}
	var raw json.RawMessage
	var syntax *json.SyntaxError
	if err := json.Unmarshal(b, &raw); errors.As(err, &syntax) {
		ref.refused = true
	} else if err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", b, err)
	}
	if ref.refused && jsonOffsetsV1 {
		// encoding/json counts the byte it refuses; at the end of the input it says
		// so, or it refuses the space it feeds itself to finish a number.
		ref.syntaxAt, ref.syntaxMsg = int(syntax.Offset)-1, syntax.Error()
		if int(syntax.Offset) == len(b) && (ref.syntaxMsg == "unexpected end of JSON input" ||
			strings.HasPrefix(ref.syntaxMsg, "invalid character ' '") && !bytes.HasSuffix(b, []byte(" "))) {
			ref.syntaxAt = len(b)
		}
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			ref.utf8At = i
			break
		}
		i += n
	}

	// encoding/json decodes each lone surrogate to one U+FFFD; in valid UTF-8 the
	// only other sources of U+FFFD are U+FFFD written out and its escape \ufffd. So
	// b has a lone surrogate exactly when its decoded strings hold more U+FFFD than
	// b writes out. (Asking only whether they hold one b does not write out would
	// miss a lone surrogate beside a real U+FFFD.) json.Decoder.Token yields every
	// key, where decoding into a map would merge equal ones; and it yields the tokens
	// before a syntax error, where I-JSON's rules are looked for too: names decoded
	// by encoding/json compared in a map per object, numbers read by
	// strconv.ParseFloat.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	decoded, depth := 0, 0
	type container struct {
		names    map[string]bool // an object's names so far; nil for an array
		wantName bool            // the object's next token is a name (or its end)
	}
	var open []container
	fault := func(at int, f jsonFault) {
		if ref.ijsonAt < 0 {
			ref.ijsonAt, ref.ijsonFault = at, f
		}
	}
	// valueEnded notes that a value of the innermost container has ended.
	valueEnded := func() {
		if len(open) > 0 && open[len(open)-1].names != nil {
			open[len(open)-1].wantName = true
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		} else if err != nil {
			if !ref.refused && ref.utf8At < 0 {
				t.Fatalf("json.Decoder.Token(%q): %v", b, err)
			}
			break
		}
		text := bytes.TrimLeft(b[before:dec.InputOffset()], " \t\r\n,:")
		at := int(dec.InputOffset()) - len(text)
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '[' || tok == '{' {
				if len(open) > 0 {
					open[len(open)-1].wantName = false
				}
				depth++
				ref.depth = max(ref.depth, depth)
				if depth == 4 && ref.fourthAt < 0 {
					ref.fourthAt = int(dec.InputOffset()) - 1
				}
				c := container{}
				if tok == '{' {
					c = container{names: map[string]bool{}, wantName: true}
				}
				open = append(open, c)
			} else {
				depth--
				open = open[:len(open)-1]
				valueEnded()
			}
		case string:
			n := strings.Count(tok, "\uFFFD")
			decoded += n
			if len(open) > 0 && open[len(open)-1].wantName {
				// A name decoded with a loss (bytes that are not UTF-8, lone
				// surrogates) is refused for that, at or before it.
				c := &open[len(open)-1]
				lossless := n == bytes.Count(text, []byte("\uFFFD"))+replacementEscapes(text)
				if lossless && c.names[tok] {
					fault(at, jsonDuplicateName)
				}
				c.names[tok], c.wantName = true, false
				continue
			}
			valueEnded()
		case json.Number:
			if f, _ := strconv.ParseFloat(string(tok), 64); len(tok) > MaxJSONNumberBytes {
				fault(at, jsonNumberTooLong)
			} else if math.IsInf(f, 0) {
				fault(at, jsonNumberRange)
			}
			valueEnded()
		default: // true, false, null
			valueEnded()
		}
		if depth == 0 {
			break // the value has ended: what follows is refused as such
		}
	}
	if ref.refused || ref.utf8At >= 0 {
		return ref
	}
	ref.ok = decoded == bytes.Count(b, []byte("\uFFFD"))+replacementEscapes(b) && ref.ijsonAt < 0
	return ref
}

// replacementEscapes counts the \ufffd escapes in b, which must be valid JSON:
// outside strings there are no backslashes, and inside one each starts an escape.
func replacementEscapes(b []byte) int {
	n := 0
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' {
			if b[i+1] == 'u' && strings.EqualFold(string(b[i+2:i+6]), "fffd") {
				n++
			}
			i++ // past the escaped character, so that \\ is not read as two backslashes
		}
	}
	return n
}

var jsonTextErrorFormat = regexp.MustCompile(`^(no JSON value|` +
	`(data after the JSON value|invalid UTF-8) at byte \d+|` +
	`a \\u escape at byte \d+ is a lone surrogate \(\\u[0-9a-fA-F]{4}\)|` +
	`nested deeper than \d+ levels at byte \d+|` +
	`(duplicate member name|number out of range|number too long) at .+ \(byte \d+\): .+ \(I-JSON, RFC 7493\)|` +
	`malformed JSON at byte \d+: .+)$`)

// jsonOffsetsV1 says whether encoding/json's syntax errors count the byte
// they refuse, as up to Go 1.26: then where CheckJSON refuses a text is
// compared with where encoding/json does. Go 1.27's encoding/json, built on
// encoding/json/v2, counts otherwise (0 for a number cut short, past the
// whole of a refused rune), and there only what each accepts is compared.
var jsonOffsetsV1 = func() bool {
	for in, want := range map[string]int64{"-": 1, "é": 1} {
		var raw json.RawMessage
		var syntax *json.SyntaxError
		if !errors.As(json.Unmarshal([]byte(in), &raw), &syntax) || syntax.Offset != want {
			return false
		}
	}
	return true
}()

func TestTheJSONOracleComparesWhereTextsAreRefusedOnGo126(t *testing.T) {
	if strings.HasPrefix(runtime.Version(), "go1.26") && !jsonOffsetsV1 {
		t.Fatal("encoding/json of " + runtime.Version() + " counts syntax error offsets unlike Go 1.26: the oracle no longer compares where CheckJSON refuses a text")
	}
}

// checkAgainstReference fails t unless CheckJSON(b, 10000) accepts b exactly when
// referenceJSON does and otherwise refuses it where and as encoding/json,
// unicode/utf8 and strconv would; CheckJSON(b, 3) refuses exactly what nests deeper
// than 3; and what CheckJSON accepts, encoding/json decodes into an any (which
// refuses a number that is ±Inf as a float64).
func checkAgainstReference(t *testing.T, b []byte) {
	ref := referenceJSON(t, b)
	err := CheckJSON(b, maxJSONNesting)
	if (err == nil) != ref.ok {
		t.Fatalf("CheckJSON(%q) = %v, but encoding/json says %+v", b, err, ref)
	}
	if err == nil {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("CheckJSON(%q) accepts what encoding/json cannot decode into an any: %v", b, err)
		}
	}
	err3 := CheckJSON(b, 3)
	if ref.ok {
		want := fmt.Sprintf("nested deeper than 3 levels at byte %d", ref.fourthAt)
		if (err3 == nil) != (ref.depth <= 3) || err3 != nil && err3.Error() != want {
			t.Fatalf("CheckJSON(%q, 3) = %v; it nests %d deep (%q)", b, err3, ref.depth, want)
		}
		return
	}
	if err3 == nil {
		t.Fatalf("CheckJSON(%q, 3) accepts what CheckJSON(b, 10000) refuses: %v", b, err)
	}

	var e *jsonTextError
	if !errors.As(err, &e) || !jsonTextErrorFormat.MatchString(e.Error()) ||
		e.fault != jsonNoValue && !strings.Contains(e.Error(), fmt.Sprintf(" byte %d", e.offset)) &&
			!strings.Contains(e.Error(), fmt.Sprintf("(byte %d)", e.offset)) {
		t.Fatalf("CheckJSON(%q) = %#v (%v), not a jsonTextError in a known format", b, err, err)
	}
	if !jsonOffsetsV1 {
		return // where it fails is not known
	}
	first := len(b) + 1 // the first byte encoding/json or unicode/utf8 refuses
	for _, at := range []int{ref.syntaxAt, ref.utf8At, ref.ijsonAt} {
		if at >= 0 {
			first = min(first, at)
		}
	}
	if e.fault == jsonLoneSurrogate {
		if e.offset >= first || !bytes.HasPrefix(b[e.offset:], []byte(`\u`)) {
			t.Fatalf("CheckJSON(%q) = %v, but encoding/json says %+v", b, err, ref)
		}
		return
	}
	want := jsonMalformed
	switch {
	case first == ref.ijsonAt:
		want = ref.ijsonFault
	case first == ref.utf8At:
		want = jsonBadUTF8
	case strings.Contains(ref.syntaxMsg, "exceeded max depth"):
		want = jsonTooDeep
	case strings.HasSuffix(ref.syntaxMsg, "in string literal"):
		want = jsonControl
	case len(bytes.Trim(b, " \t\r\n")) == 0:
		want = jsonNoValue
	case e.fault == jsonDataAfter && strings.HasSuffix(ref.syntaxMsg, "after top-level value"):
		want = jsonDataAfter
	}
	if e.offset != first || e.fault != want {
		t.Fatalf("CheckJSON(%q) = %v (fault %d), but encoding/json says %+v (fault %d)", b, err, e.fault, ref, want)
	}
}

// createTaskBody is a create-task request as clients send them: the
// per-call cost of CheckJSON is most of what it takes for one.
const createTaskBody = `{"input":"Write the word 'Washington' to a file called output.txt",` +
	`"additional_input":{"model":"gpt-4o","temperature":0.7,"max_tokens":256,"tags":["demo","ci"]}}`

func BenchmarkCheckJSON(b *testing.B) {
	for _, size := range []struct {
		name string
		doc  []byte
	}{{"body", []byte(createTaskBody)}, {"4KiB", stepOutput(4 << 10)}, {"1MiB", stepOutput(1 << 20)},
		{"1MiB_one_object", oneObjectOfNames(1 << 20)}} {
		if err := CheckJSON(size.doc, MaxJSONDepth); err != nil {
			b.Fatal(err)
		}
		b.Run(size.name+"/CheckJSON", func(b *testing.B) {
			b.SetBytes(int64(len(size.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if CheckJSON(size.doc, MaxJSONDepth) != nil {
					b.Fatal("refused")
				}
			}
		})
		b.Run(size.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(size.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(size.doc) {
					b.Fatal("refused")
				}
			}
		})
		b.Run(size.name+"/json.Valid+utf8.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(size.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(size.doc) || !utf8.Valid(size.doc) {
					b.Fatal("refused")
				}
			}
		})
	}
}
