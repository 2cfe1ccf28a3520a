package protocol

import (
	"strings"
	"testing"
)

func TestCleanDir(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"", "", ""},
		{".", "", ""},
		{"./", "", ""},
		{"a", "a", ""},
		{"a/b/", "a/b", ""},
		{"./a//b/./c", "a/b/c", ""},
		{"python/code/", "python/code", ""},
		{"日本/文書", "日本/文書", ""},
		{"\uff0e\uff0e/x", "\uff0e\uff0e/x", ""}, // fullwidth dots are a name
		{"...", "...", ""},
		{"..", "", "leaves the task's workspace"},
		{"../a", "", "leaves"},
		{"a/..", "", "leaves"},
		{"a/../b", "", "leaves"}, // refused even though it stays inside: never guess
		{"/", "", "absolute"},
		{"/etc", "", "absolute"},
		{`a\b`, "", "backslash"},
		{"a\x00b", "", "NUL"},
		{"a\tb", "", "control character"},
		{"a\u0085b", "", "control character"},
		{"a\xffb", "", "UTF-8"},
		{strings.Repeat("x", 256), "", "longer than 255"},
		{strings.Repeat("x/", 513), "", "longer than 1024"},
		{strings.Repeat("x/", 33), "", "deeper than 32"},
		{strings.Repeat("x/", 32), strings.TrimSuffix(strings.Repeat("x/", 32), "/"), ""},
	} {
		got, err := CleanDir(tc.in)
		if tc.err != "" {
			if err == nil || ErrorCode(err) != EBADPATH || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CleanDir(%q) = %q, %v; want a bad-path error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CleanDir(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := CleanFilePath("./"); err == nil {
		t.Error("CleanFilePath(./) names no file but was accepted")
	}
}

func TestCleanFileName(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"a.txt", "a.txt", ""},
		{"résumé 日本.txt", "résumé 日本.txt", ""},
		{"dir/a.txt", "a.txt", ""},
		{"../../etc/passwd", "passwd", ""},
		{`C:\Users\me\a.txt`, "a.txt", ""},
		{".hidden", ".hidden", ""},
		{"", "", "not a usable name"},
		{".", "", "not a usable name"},
		{"..", "", "not a usable name"},
		{"dir/", "", "not a usable name"},
		{"a\x00.txt", "", "NUL"},
		{"a\n.txt", "", "control"},
		{"\xff", "", "UTF-8"},
		{strings.Repeat("n", 256), "", "longer than 255"},
	} {
		got, err := CleanFileName(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CleanFileName(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CleanFileName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPagination(t *testing.T) {
	for _, tc := range []struct {
		page  Page
		total int
		want  Pagination
	}{
		{Page{1, 10}, 0, Pagination{0, 0, 1, 10}},
		{Page{1, 10}, 1, Pagination{1, 1, 1, 10}},
		{Page{2, 10}, 10, Pagination{10, 1, 2, 10}},
		{Page{1, 10}, 11, Pagination{11, 2, 1, 10}},
		{Page{3, 7}, 25, Pagination{25, 4, 3, 7}},
	} {
		if got := tc.page.Pagination(tc.total); got != tc.want {
			t.Errorf("%+v of %d = %+v, want %+v", tc.page, tc.total, got, tc.want)
		}
	}
}
