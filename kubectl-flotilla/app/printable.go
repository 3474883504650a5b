package app

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// printable makes s safe to print on a terminal. Much of what the plugin
// shows was written by others — a member's agent (Work and condition
// messages, reasons), any controller or user (events) — and a terminal
// acts on control sequences: ESC [2J clears the screen, OSC 8 hides a
// link, OSC 52 writes the clipboard, a bare CR overwrites the line before
// it. A tab or newline becomes a space (either would break the columns);
// every other control character (C0, DEL, C1), a Unicode format character
// (U+202E reverses what follows) and an invalid UTF-8 byte is shown
// escaped, visibly: "\x1b", "\u202e", "\xff". Text without any of them is
// returned as it is.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !statuslimits.Printable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t', r == '\n':
			b.WriteByte(' ')
		case r < 0x80 && !statuslimits.Printable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !statuslimits.Printable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// printableArgs is printable applied to each string argument.
func printableArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = printable(s)
		}
		out[i] = a
	}
	return out
}
