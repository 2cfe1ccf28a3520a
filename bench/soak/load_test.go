package main

import (
	"bytes"
	"testing"
)

func TestUUIDKeepsTheCanonicalForm(t *testing.T) {
	const s = "01a22438-6bdc-7609-9f4f-9febc145d1dc"
	u, ok := parseUUID(s)
	if !ok {
		t.Fatalf("parseUUID(%q) failed", s)
	}
	if got := u.String(); got != s {
		t.Errorf("round trip: %q, want %q", got, s)
	}
	for _, bad := range []string{"", "01a22438-6bdc-7609-9f4f-9febc145d1d", "01a22438x6bdc-7609-9f4f-9febc145d1dc",
		"01a22438-6bdc-7609-9f4f-9febc145d1dz", "01A22438-6BDC-7609-9F4F-9FEBC145D1DC0"} {
		if _, ok := parseUUID(bad); ok {
			t.Errorf("parseUUID(%q) accepted it", bad)
		}
	}
}

// What a download is checked against is what was uploaded: the same seed
// and size give the same bytes, another seed others.
func TestArtifactBytesDependOnTheSeedOnly(t *testing.T) {
	a, b := artifactBytes(7, 1000), artifactBytes(7, 1000)
	if !bytes.Equal(a, b) {
		t.Error("the same seed gave other bytes")
	}
	if bytes.Equal(a, artifactBytes(8, 1000)) {
		t.Error("another seed gave the same bytes")
	}
	if len(artifactBytes(0, 4096)) != 4096 {
		t.Error("the size is not kept")
	}
}
