package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
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
	{`{"a":1,"a":2}`, ""}, // RFC 8259 only says keys SHOULD be unique
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

func TestCheckJSONAgreesWithEncodingJSON(t *testing.T) {
	inputs := [][]byte{}
	for _, tc := range jsonTextCases {
		inputs = append(inputs, []byte(tc.in))
	}
	base := jsonMutationBase
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
	for _, in := range inputs {
		checkAgainstReference(t, in)
	}
}

// FuzzCheckJSON checks that CheckJSON accepts exactly what encoding/json and
// unicode/utf8 say it should, and refuses the rest at the right byte.
func FuzzCheckJSON(f *testing.F) {
	for _, tc := range jsonTextCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(jsonMutationBase))
	f.Fuzz(checkAgainstReference)
}

// jsonReference is what encoding/json and unicode/utf8 say about a text, worked out
// without any of CheckJSON's code.
type jsonReference struct {
	ok        bool   // one JSON value (nested at most 10000 deep) in valid UTF-8 with no lone surrogate
	refused   bool   // json.Unmarshal refuses it
	syntaxAt  int    // the first byte json.Unmarshal refuses, len(b) for the end; -1 for none, or where its offsets do not say (jsonOffsetsV1)
	syntaxMsg string // and what it says there
	utf8At    int    // the first byte that is not UTF-8; -1 for none
	depth     int    // if ok, how deeply arrays and objects nest
	fourthAt  int    // if ok, the offset of the first bracket that opens a fourth level; -1 for none
}

func referenceJSON(t *testing.T, b []byte) jsonReference {
	t.Helper()
	ref := jsonReference{syntaxAt: -1, utf8At: -1, fourthAt: -1}
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
	if ref.refused || ref.utf8At >= 0 {
		return ref
	}

	// encoding/json decodes each lone surrogate to one U+FFFD; in valid UTF-8 the
	// only other sources of U+FFFD are U+FFFD written out and its escape \ufffd. So
	// b has a lone surrogate exactly when its decoded strings hold more U+FFFD than
	// b writes out. (Asking only whether they hold one b does not write out would
	// miss a lone surrogate beside a real U+FFFD.) json.Decoder.Token yields every
	// key, where decoding into a map would merge equal ones.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	decoded, depth := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("json.Decoder.Token(%q): %v", b, err)
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '[' || tok == '{' {
				depth++
				ref.depth = max(ref.depth, depth)
				if depth == 4 && ref.fourthAt < 0 {
					ref.fourthAt = int(dec.InputOffset()) - 1
				}
			} else {
				depth--
			}
		case string:
			decoded += strings.Count(tok, "\uFFFD")
		}
	}
	ref.ok = decoded == bytes.Count(b, []byte("\uFFFD"))+replacementEscapes(b)
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
// referenceJSON does and otherwise refuses it where and as encoding/json and
// unicode/utf8 would; and CheckJSON(b, 3) refuses exactly what nests deeper than 3.
func checkAgainstReference(t *testing.T, b []byte) {
	ref := referenceJSON(t, b)
	err := CheckJSON(b, maxJSONNesting)
	if (err == nil) != ref.ok {
		t.Fatalf("CheckJSON(%q) = %v, but encoding/json says %+v", b, err, ref)
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
		e.fault != jsonNoValue && !strings.Contains(e.Error(), fmt.Sprintf(" byte %d", e.offset)) {
		t.Fatalf("CheckJSON(%q) = %#v (%v), not a jsonTextError in a known format", b, err, err)
	}
	if !jsonOffsetsV1 {
		return // where it fails is not known
	}
	first := len(b) + 1 // the first byte encoding/json or unicode/utf8 refuses
	for _, at := range []int{ref.syntaxAt, ref.utf8At} {
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

func BenchmarkCheckJSON(b *testing.B) {
	for _, size := range []struct {
		name string
		doc  []byte
	}{{"4KiB", stepOutput(4 << 10)}, {"1MiB", stepOutput(1 << 20)}} {
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
