package statepreservation

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Note is cut on a character boundary, within maxNote bytes.
func TestNoteIsCutOnACharacter(t *testing.T) {
	for pad := range 3 {
		note := Note(errors.New(strings.Repeat("x", pad) + strings.Repeat("é", 1000)))
		if !utf8.ValidString(note) || len(note) > maxNote || !strings.HasPrefix(note, "; state not carried: ") {
			t.Fatalf("pad %d: note of %d bytes (valid UTF-8: %v), want at most %d", pad, len(note), utf8.ValidString(note), maxNote)
		}
	}
}
