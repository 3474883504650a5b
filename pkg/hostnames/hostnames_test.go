package hostnames

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	// 4 labels of 63 and the dots: 255; cut to exactly 253.
	name253 := strings.Join([]string{long63, long63, long63, strings.Repeat("b", 61)}, ".")
	for _, tc := range []struct{ in, want string }{
		{"web.example.com", "web.example.com"},
		{"WEB.Example.COM", "web.example.com"},
		{"web.example.com.", "web.example.com"},
		{"web.example.com..", "web.example.com"},
		{"web.example.com....", "web.example.com"},
		{"  web.example.com.\t\n", "web.example.com"},
		{`w\101b.example.com`, "web.example.com"},
		{`\087\069\066.example.com`, "web.example.com"},
		{`w\eb.example.com`, "web.example.com"},
		{`\042.example.com`, "*.example.com"},
		{"*.example.com", "*.example.com"},
		{"*.EXAMPLE.com.", "*.example.com"},
		{"*.com", "*.com"},
		{"localhost", "localhost"},
		{"bücher.example.com", "xn--bcher-kva.example.com"},
		{"BÜCHER.example.com", "xn--bcher-kva.example.com"},
		{"Bücher.Example.Com.", "xn--bcher-kva.example.com"},
		{"xn--bcher-kva.example.com", "xn--bcher-kva.example.com"},
		{"XN--BCHER-KVA.example.com", "xn--bcher-kva.example.com"},
		{`b\195\188cher.example.com`, "xn--bcher-kva.example.com"}, // ü as escaped UTF-8
		{"ｗｅｂ.example.com", "web.example.com"},                     // fullwidth letters (UTS 46 width mapping)
		{"faß.de", "xn--fa-hia.de"},                                // nontransitional: ß stays ß
		{"*.bücher.example", "*.xn--bcher-kva.example"},
		{"a-b.c--d.example.com", "a-b.c--d.example.com"},
		{"0.example.com", "0.example.com"},
		{long63 + ".example.com", long63 + ".example.com"},
		{name253, name253},
		{name253 + ".", name253},
	} {
		got, err := Canonical(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	long64 := strings.Repeat("a", 64)
	name254 := strings.Join([]string{strings.Repeat("a", 63), strings.Repeat("a", 63), strings.Repeat("a", 63), strings.Repeat("b", 62)}, ".")
	for _, in := range []string{
		"", " ", ".", "..", ".example.com", "web..example.com", "web.example.com. .",
		`web\.example.com`, `web\046example.com`, `web.example.com\.`, `web.example.com\`, `web\1.example.com`, `web\256.example.com`, `web\12`,
		"web example.com", "web_x.example.com", "-web.example.com", "web-.example.com", "we!b.example.com",
		"a.*.example.com", "*", "*.", "**.example.com", "*a.example.com", "*.*.example.com",
		long64 + ".example.com", name254,
		"xn--.example.com", "xn--abc-.example.com", "xn--zz-z.example.com", "xn--zz.example.com", // not a valid A-label (ASCII only, or garbage)
		"xn--Bcher-kva.example.com.\xff", "\xff.example.com", // not UTF-8
		"web\u3002example.com", // an ideographic full stop is not our label separator
		strings.Repeat("a", maxInput+1),
	} {
		if got, err := Canonical(in); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", in, got)
		}
	}
}

// TestCanonicalMapsIgnoredRunes: UTS 46 maps some runes to nothing; a label
// left with nothing is refused, one left with letters is that label.
func TestCanonicalMapsIgnoredRunes(t *testing.T) {
	if got, err := Canonical("we\u00adb.example.com"); err != nil || got != "web.example.com" {
		t.Errorf("a soft hyphen inside a label: %q, %v", got, err)
	}
	if got, err := Canonical("\u00ad.example.com"); err == nil {
		t.Errorf("a label of a soft hyphen only: %q, want an error", got)
	}
}

// TestPatternMatchesCanonical: Pattern (which the admission policy uses)
// accepts exactly the canonical names.
func TestPatternMatchesCanonical(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, in := range []string{"web.example.com", "*.example.com", "xn--bcher-kva.example.com", "a", strings.Repeat("a", 63) + ".b"} {
		if c, err := Canonical(in); err != nil || c != in || !re.MatchString(in) {
			t.Errorf("%q: Canonical %q, %v; pattern %v", in, c, err, re.MatchString(in))
		}
	}
	for _, in := range []string{"Web.example.com", "web.example.com.", " web.example.com", "web..example.com", "-a.b", "a-.b", "a_b.c", "a.*.b", strings.Repeat("a", 64) + ".b"} {
		if re.MatchString(in) {
			t.Errorf("pattern accepts %q", in)
		}
	}
}

// TestPolicyUsesPattern: the shipped admission policy checks hosts with
// Pattern, byte for byte (as a CEL raw string).
func TestPolicyUsesPattern(t *testing.T) {
	b, err := os.ReadFile("../../manifests/crds/validating-admission-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "r'"+Pattern+"'") {
		t.Fatalf("manifests/crds/validating-admission-policy.yaml does not check hosts with hostnames.Pattern %s", Pattern)
	}
	if !strings.Contains(string(b), fmt.Sprintf("size(h) <= %d", MaxLength)) {
		t.Fatalf("manifests/crds/validating-admission-policy.yaml does not bound hosts to %d bytes", MaxLength)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		name, domain string
		want         bool
	}{
		{"example.com", "example.com", true},
		{"a.example.com", "example.com", true},
		{"*.example.com", "example.com", true},
		{"a.b.example.com", "example.com", true},
		{"badexample.com", "example.com", false},
		{"example.com", "a.example.com", false},
		{"com", "example.com", false},
	} {
		if got := Within(tc.name, tc.domain); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.name, tc.domain, got)
		}
	}
}

// FuzzCanonicalHost: Canonical never panics, is fast and small on any
// input, returns only names Pattern accepts (≤ 253 bytes, labels ≤ 63), is
// idempotent, and maps every equivalent spelling of a name (ASCII case,
// trailing dots, whitespace, \DDD and \X escapes, the U-label of an
// A-label) to the same name.
func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"web.example.com", "WEB.example.com..", " *.Example.com. ", `w\101b.example.com`, `\042.example.com`,
		"bücher.example.com", "xn--bcher-kva.example.com", "ｗｅｂ.example.com", "faß.de", `web\.example.com`, "a.*.b", "",
		"xn--abc-.example.com", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63), "\u0627\u0644\u0639\u0631\u0628\u064a\u0629.example"} {
		f.Add(s, uint8(0))
	}
	re := regexp.MustCompile(Pattern)
	f.Fuzz(func(t *testing.T, in string, variant uint8) {
		out, err := bounded(t, in)
		// ASCII case never matters, valid or not.
		if out2, err2 := bounded(t, upperASCII(in)); out2 != out || (err == nil) != (err2 == nil) {
			t.Fatalf("Canonical(%q) = %q, %v but its upper case gives %q, %v", in, out, err, out2, err2)
		}
		if err != nil {
			return
		}
		if len(out) > MaxLength || !re.MatchString(out) {
			t.Fatalf("Canonical(%q) = %q: not a canonical name", in, out)
		}
		if again, err := bounded(t, out); err != nil || again != out {
			t.Fatalf("not idempotent: Canonical(%q) = %q, then %q, %v", in, out, again, err)
		}
		// Spellings of out that name the same DNS name.
		spelling := out
		if variant&1 != 0 {
			spelling = upperASCII(spelling)
		}
		if variant&2 != 0 {
			spelling = escapeAll(spelling)
		}
		if variant&4 != 0 {
			spelling += strings.Repeat(".", 1+int(variant>>5))
		}
		if variant&8 != 0 {
			spelling = " \t" + spelling + "\n "
		}
		if got, err := bounded(t, spelling); err != nil || got != out {
			t.Fatalf("Canonical(%q) = %q, %v; want %q as for %q", spelling, got, err, out, in)
		}
		if variant&16 != 0 {
			if u, err := lookup.ToUnicode(out); err == nil {
				if got, err := bounded(t, u); err != nil || got != out {
					t.Fatalf("the U-label form %q of %q gives %q, %v", u, out, got, err)
				}
			}
		}
		if trimmed := strings.TrimSpace(in); trimmed != "" && !strings.HasSuffix(trimmed, `\`) {
			if got, err := bounded(t, trimmed+".."); err != nil || got != out {
				t.Fatalf("Canonical(%q) = %q, %v; want %q as for %q", trimmed+"..", got, err, out, in)
			}
		}
	})
}

// bounded is Canonical, failing the test if one call takes over 100 ms
// (twice, so a descheduled worker does not fail it) or allocates over 64
// KiB.
func bounded(t *testing.T, in string) (string, error) {
	t.Helper()
	var before, after runtime.MemStats
	for attempt := 0; ; attempt++ {
		runtime.ReadMemStats(&before)
		start := time.Now()
		out, err := Canonical(in)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
			t.Fatalf("Canonical of %d bytes allocated %d bytes", len(in), alloc)
		}
		if took <= 100*time.Millisecond {
			return out, err
		}
		if attempt == 1 {
			t.Fatalf("Canonical of %d bytes took %v", len(in), took)
		}
	}
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// escapeAll writes every byte of a canonical name but the dots between
// labels as \DDD.
func escapeAll(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			b.WriteByte('.')
			continue
		}
		fmt.Fprintf(&b, `\%03d`, name[i])
	}
	return b.String()
}
