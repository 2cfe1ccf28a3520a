package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi/secretform"
)

// testSecrets are secrets made of every class of character a secret may
// hold (checkSecret), each alone and mixed where an encoder treats them
// apart.
var testSecrets = map[string]string{
	"letters":                    "abcdefghijKLMNOPQRST",
	"digits":                     "0123456789012345",
	"every ASCII punctuation":    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
	"a space inside":             "open sesame key",
	"non-ASCII UTF-8":            "clé-ünïcødé-密钥-🔑-\u00a0-\u200b",
	"HTML-sensitive":             "<script>&amp;</script>",
	"quote, backslash and HTML":  `a"b\c<d>e&f`,
	"escapes written out":        `\u003c\"\\n%3C\x7f`,
	"base64 alphabet and equals": "+/=-_~AAAA==",
	"the longest, escaped":       strings.Repeat(`k"<`, (MaxSecretBytes-1)/3),
}

// textEncoders are the encoders on the path from a server to what
// agentrt hands on, called as the path calls them, on a text the secret
// is inside; decode reads the encoded text back.
var textEncoders = []struct {
	name   string
	encode func(text string) string
	decode func(enc string) (string, error)
}{
	{"as it is", func(s string) string { return s }, func(s string) (string, error) { return s, nil }},
	{"json.Marshal", func(s string) string { b, _ := json.Marshal(s); return string(b) }, jsonDecode},
	{"a json.Encoder without HTML escaping", func(s string) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		return b.String()
	}, jsonDecode},
	{"JSON with non-ASCII escaped", func(s string) string { return `"` + secretform.JSONASCII(s) + `"` }, jsonDecode},
	{"fmt %q", func(s string) string { return fmt.Sprintf("%q", s) }, strconv.Unquote},
	{"fmt %+q", func(s string) string { return fmt.Sprintf("%+q", s) }, strconv.Unquote},
	{"a textproto error", func(s string) string {
		r := textproto.NewReader(bufio.NewReader(strings.NewReader("X " + s + "\r\n\r\n")))
		_, err := r.ReadMIMEHeader()
		return err.Error()
	}, func(s string) (string, error) {
		v, err := strconv.Unquote(s[strings.IndexByte(s, '"'):])
		return strings.TrimPrefix(v, "X "), err
	}},
	{"a url.Error", func(s string) string {
		return (&url.Error{Op: "Get", URL: s, Err: errors.New("EOF")}).Error()
	}, func(s string) (string, error) {
		return strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(s, "Get "), ": EOF"))
	}},
	{"slog's text handler", func(s string) string {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", s)
		return b.String()
	}, func(s string) (string, error) {
		v := strings.TrimSuffix(strings.TrimPrefix(s, "level=INFO msg=m v="), "\n")
		if strings.HasPrefix(v, `"`) {
			return strconv.Unquote(v)
		}
		return v, nil
	}},
	{"slog's JSON handler", func(s string) string {
		var b bytes.Buffer
		slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", s)
		return b.String()
	}, func(s string) (string, error) {
		var m struct{ V string }
		err := json.Unmarshal([]byte(s), &m)
		return m.V, err
	}},
	{"url.QueryEscape", url.QueryEscape, url.QueryUnescape},
	{"url.Values", func(s string) string { return url.Values{"k": {s}}.Encode() }, func(s string) (string, error) {
		v, err := url.ParseQuery(s)
		return v.Get("k"), err
	}},
	{"url.PathEscape", url.PathEscape, url.PathUnescape},
	{"a URL's path as net/url writes it", func(s string) string { return (&url.URL{Path: "/" + s}).EscapedPath() }, func(s string) (string, error) {
		v, err := url.PathUnescape(s)
		return strings.TrimPrefix(v, "/"), err
	}},
}

func jsonDecode(s string) (string, error) {
	var v string
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestEverySecretOfTheTestsIsOneASecretMayBe(t *testing.T) {
	for name, v := range testSecrets {
		if err := checkSecret("KEY", v); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A server's message that holds a secret, written by each encoder on the
// path and then scrubbed, reads back as the message with the secret's
// placeholder: every form of every secret is found inside any text, and
// replaced whole.
func TestEveryFormOfASecretIsScrubbedInsideAnyText(t *testing.T) {
	for name, value := range testSecrets {
		s := NewScrubber([]Secret{{Name: "KEY", Value: value}})
		for _, e := range textEncoders {
			enc := e.encode("invalid key " + value + "; try again")
			got, err := e.decode(s.String(enc))
			if want := "invalid key {{secret:KEY}}; try again"; err != nil || got != want {
				t.Errorf("%s, %s:\n%s\nscrubbed and read back is %q (%v), want %q", name, e.name, enc, got, err, want)
			}
		}
		// base64 of the value alone (a base64 text holds it only where
		// it starts at a multiple of 3 bytes).
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			text := "key=" + enc.EncodeToString([]byte(value)) + ";"
			if got := s.String(text); got != "key={{secret:KEY}};" {
				t.Errorf("%s, base64 %q: scrubbed is %q", name, text, got)
			}
		}
	}
}

// Two secrets, each holding what the other's forms could be confused
// with, are each replaced by their own placeholder.
func TestScrubbingReplacesTheLongestFormFirst(t *testing.T) {
	s := NewScrubber([]Secret{{Name: "SHORT", Value: "abcdefgh"}, {Name: "LONG", Value: `abcdefgh"<&>`}})
	for text, want := range map[string]string{
		`x abcdefgh"<&> y`:               `x {{secret:LONG}} y`,
		`x abcdefgh\"\u003c\u0026\u003e`: `x {{secret:LONG}}`,
		`x abcdefgh\"<&>`:                `x {{secret:LONG}}`,
		`x abcdefgh y`:                   `x {{secret:SHORT}} y`,
	} {
		if got := s.String(text); got != want {
			t.Errorf("%q scrubbed is %q, want %q", text, got, want)
		}
	}
}

func TestJSONWithNonASCIIEscapedIsWhatPythonWrites(t *testing.T) {
	// json.dumps("clé🔑\"\\") in Python 3.
	if got, want := secretform.JSONASCII("clé🔑\"\\"), `cl\u00e9\ud83d\udd11\"\\`; got != want {
		t.Errorf("jsonASCII = %s, want %s", got, want)
	}
}

func TestASecretsValueIsWhatAHeaderCarriesAndScrubbingFinds(t *testing.T) {
	for value, why := range map[string]string{
		"short":                   "at least 8",
		"sk-0123\n":               "control character",
		"sk-01\t23456":            "control character",
		"sk-0123456\x7f":          "control character",
		"sk-0123\xff\xfe456":      "not UTF-8",
		"sk-0123\u0085456":        "U+0085",
		"sk-0123\u2028456":        "U+2028",
		"sk-0123\u2029456":        "U+2029",
		" sk-0123456":             "begins or ends with a space",
		"sk-0123456 ":             "begins or ends with a space",
		"sk-{{secret:X}}":         "placeholder",
		strings.Repeat("k", 4097): "over 4096 bytes",
	} {
		if err := checkSecret("KEY", value); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("checkSecret(%q) = %v, want an error saying %q", value, err, why)
		}
	}
}

// A server that answers with the key in what net/http cannot read gets
// an error from Go that quotes it (%q): the plugin reads the placeholder.
func TestAnErrorGoWritesQuotingWhatAServerSentHoldsThePlaceholder(t *testing.T) {
	for name, value := range testSecrets {
		if len(value) > 1024 {
			continue // a header line holds it; a status line is cut shorter
		}
		answers := []string{
			"HTTP/1.1 200 OK\r\nX-Bad " + value + "\r\n\r\n",                                     // malformed MIME header: missing colon: %q
			"HTTP/1.1 302 Found\r\nLocation: http://[" + value + "\r\nContent-Length: 0\r\n\r\n", // failed to parse Location header %q
		}
		if !strings.Contains(value, " ") { // the status code ends at a space
			answers = append(answers, "HTTP/1.1 2"+value+" OK\r\n\r\n") // malformed HTTP status code %q
		}
		for _, answer := range answers {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				bufio.NewReader(conn).ReadString('\n') // the request line is enough
				conn.Write([]byte(answer))
			}()
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			u := "http://api.test:" + port + "/"
			c, logs := newClient(t, Policy{Allow: dests(t, u), PrivateHosts: []string{"api.test"},
				Secrets: []Secret{{Name: "KEY", Value: value, Destinations: dests(t, u)}}}, Limits{})
			_, err = c.Do(context.Background(), &Request{URL: u})
			ln.Close()
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Message, "{{secret:KEY}}") {
				t.Errorf("%s, %q: the error %v does not hold the placeholder", name, answer, err)
				continue
			}
			for _, form := range secretform.Of(value) {
				if strings.Contains(e.Message, form) || strings.Contains(logs.String(), form) {
					t.Errorf("%s: the error or the log holds the secret as %q:\n%s\n%s", name, form, e.Message, logs)
				}
			}
		}
	}
}

func TestTheGrantsScrubberScrubsEverySecretOfEveryAgent(t *testing.T) {
	g := NewGrants()
	for name, agent := range map[string]string{"A_KEY": "a", "B_KEY": "b", "ALL_KEY": Every} {
		if err := g.AddSecret(name, "value-of-"+name, []string{agent}, []string{"https://api.test/"}); err != nil {
			t.Fatal(err)
		}
	}
	got := g.Scrubber().String("value-of-A_KEY value-of-B_KEY " + strconv.Quote("value-of-ALL_KEY"))
	if want := `{{secret:A_KEY}} {{secret:B_KEY}} "{{secret:ALL_KEY}}"`; got != want {
		t.Errorf("scrubbed: %s, want %s", got, want)
	}
	var none *Grants
	if got := none.Scrubber().String("anything"); got != "anything" {
		t.Errorf("no grants scrub %q", got)
	}
}
