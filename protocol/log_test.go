package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// storedSize is how many bytes a record's message takes stored, as storage
// encodes it (a JSON string without HTML escaping), after addLog's
// replacement of invalid UTF-8.
func storedSize(t *testing.T, message []byte) int {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(bytes.ToValidUTF8(message, []byte("\uFFFD")))); err != nil {
		t.Fatal(err)
	}
	return b.Len() - 3 // the quotes and the newline
}

var logMessages = []string{
	"", "plain", strings.Repeat("\x00", 100), "\x01\x1f\b\f", "\"\\\n\r\t", "<>&", "\u2028\u2029",
	"é€😀", "\xff\xfe", "\xe2\x82", "a\xc0\xafb", strings.Repeat("\xed\xa0\x80", 10),
}

func TestLogRecordSizeCountsWhatARecordTakesStored(t *testing.T) {
	for _, m := range logMessages {
		got, stored := LogRecordSize([]byte(m))-LogRecordOverhead, storedSize(t, []byte(m))
		if got < stored {
			t.Errorf("%q counts %d bytes but takes %d stored", m, got, stored)
		}
		if bytes.Equal(bytes.ToValidUTF8([]byte(m), nil), []byte(m)) && got != stored {
			t.Errorf("valid UTF-8 %q counts %d bytes, takes %d stored", m, got, stored)
		}
	}
}

func FuzzLogRecordSize(f *testing.F) {
	for _, m := range logMessages {
		f.Add([]byte(m))
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		if got, stored := LogRecordSize(m)-LogRecordOverhead, storedSize(t, m); got < stored {
			t.Fatalf("%q counts %d bytes but takes %d stored", m, got, stored)
		}
	})
}
