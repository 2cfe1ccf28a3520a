package httpapi

import "testing"

func TestContentDisposition(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt":      `attachment; filename="a.txt"`,
		`say "hi"`:   `attachment; filename="say \"hi\""`,
		"résumé.pdf": `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`,
		"a b.txt":    `attachment; filename="a b.txt"`,
		"日本 x.txt":   `attachment; filename="__ x.txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC%20x.txt`,
	} {
		if got := contentDisposition(in); got != want {
			t.Errorf("contentDisposition(%q) = %s, want %s", in, got, want)
		}
	}
}
