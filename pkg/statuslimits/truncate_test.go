package statuslimits

import (
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"plain", 5, "plain"},
		{"abcdef", 5, "ab…"},
		{"éééé", 8, "éééé"},
		{"éééé", 7, "éé…"}, // 7-3 = 4 bytes: two characters
		{"éééé", 6, "é…"},  // 3 bytes left: one character, not one and a half
		{"aéééé", 6, "aé…"},
		{"aéééé", 5, "a…"},
		{"a\nb\tc", 5, "a\nb\tc"},            // control characters are kept
		{"bad\xffbyte", 20, "bad\uFFFDbyte"}, // 8 bytes in, 10 out
		{"bad\xffbyte", 9, "bad\uFFFD…"},
		{"€€", 2, ""}, // no room for a character nor the ellipsis
		{"ab", 1, "a"},
		{"x", 0, ""},
		{"x", -1, ""},
	} {
		if got := Truncate(c.in, c.max); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// truncateHolds checks Truncate's contract on one input: valid UTF-8 out,
// within the bound, a prefix of the input's valid form (with "…" when
// cut), unchanged when it fits, and idempotent.
func truncateHolds(t *testing.T, s string, maxBytes int) {
	t.Helper()
	got := Truncate(s, maxBytes)
	valid := strings.ToValidUTF8(s, "\uFFFD")
	switch {
	case !utf8.ValidString(got):
		t.Fatalf("Truncate(%q, %d) = %q: not valid UTF-8", s, maxBytes, got)
	case len(got) > max(maxBytes, 0):
		t.Fatalf("Truncate(%q, %d) = %q: %d bytes", s, maxBytes, got, len(got))
	case !strings.HasPrefix(valid, strings.TrimSuffix(got, "…")):
		t.Fatalf("Truncate(%q, %d) = %q: not a prefix of %q", s, maxBytes, got, valid)
	case len(valid) <= maxBytes && got != valid:
		t.Fatalf("Truncate(%q, %d) = %q: cut what fits", s, maxBytes, got)
	case Truncate(got, maxBytes) != got:
		t.Fatalf("Truncate(%q, %d) = %q, then %q: not idempotent", s, maxBytes, got, Truncate(got, maxBytes))
	}
	// As much as fits is kept: one more character of the valid form would
	// not fit beside the ellipsis.
	if kept := strings.TrimSuffix(got, "…"); got != valid && maxBytes >= len("…") && len(kept) < len(valid) {
		_, size := utf8.DecodeRuneInString(valid[len(kept):])
		if len(kept)+size+len("…") <= maxBytes {
			t.Fatalf("Truncate(%q, %d) = %q: cut one character too early", s, maxBytes, got)
		}
	}
}

func TestTruncateProperties(t *testing.T) {
	check := func(s string, n uint16) bool {
		truncateHolds(t, s, int(n%512))
		return true
	}
	// quick's strings are random runes; raw bytes come from the byte slices.
	if err := quick.Check(check, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
	if err := quick.Check(func(b []byte, n uint16) bool { return check(string(b), n) }, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
}

func FuzzTruncate(f *testing.F) {
	for _, s := range []string{"", "plain", "éééé", "a\xffb", "\xe2\x82", "€𝄞é\u202e", strings.Repeat("é", 100)} {
		for _, n := range []int{0, 1, 2, 3, 4, 7, 64} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		truncateHolds(t, s, n%(1<<16))
	})
}
