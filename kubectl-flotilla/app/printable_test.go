package app

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode 🚀":  "plain text, ünïcode 🚀",
		"a\tb\nc":                "a b c",
		"\x1b[2Jclear":           `\x1b[2Jclear`,
		"\x1b]52;c;aGk=\x07":     `\x1b]52;c;aGk=\x07`,
		"over\rwrite":            `over\x0dwrite`,
		"del\x7f c1\u0085\u009b": `del\x7f c1\u0085\u009b`,
		"rtl \u202eevil\u2066":   `rtl \u202eevil\u2066`,
		"bad \xff\xfe bytes":     `bad \xff\xfe bytes`,
		"nul \x00":               `nul \x00`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
