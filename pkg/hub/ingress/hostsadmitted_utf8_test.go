package ingress

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An invalid host is quoted cut on a character boundary: never a \x escape
// of half a character in the condition.
func TestHostsAdmittedCutsInvalidHostsOnACharacter(t *testing.T) {
	for pad := range 3 {
		host := strings.Repeat("x", pad) + strings.Repeat("é", 100)
		c := HostsAdmitted(nil, nil, []string{host})
		if !utf8.ValidString(c.Message) || strings.Contains(c.Message, `\x`) {
			t.Fatalf("pad %d: message %q quotes half a character", pad, c.Message)
		}
		if !strings.Contains(c.Message, `"`+strings.Repeat("x", pad)+"é") {
			t.Fatalf("pad %d: message %q does not quote the host", pad, c.Message)
		}
	}
}
