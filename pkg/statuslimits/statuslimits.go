// Package statuslimits is the one definition of how much of what a member
// reports travels through the hub: the bounds an agent keeps when it
// writes a Work's status, the same bounds the Work CRD enforces at
// admission (pkg/apis/work/v1alpha1 repeats them as numbers in its
// markers; TestCRDMatchesLimits ties the two), and the bounds the hub
// applies again when it reads a Work and when it writes its own summaries
// into a binding or template shared by many clusters.
//
// The hub treats everything an agent writes as untrusted: a member may lie
// or be compromised, and an honest one may report a huge error. Nothing one
// cluster reports may make a write to a shared object (a binding, a
// template) fail, so every copied field is bounded in size and characters,
// every list in count, and every summary the hub joins from many clusters
// ends in "… and N more clusters" before it reaches any limit.
package statuslimits

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a Work's status, as the agent writes it and the Work CRD admits
// it. The CRD markers in pkg/apis/work/v1alpha1 repeat these numbers.
const (
	// MaxConditionMessage is the most characters of a Work condition's
	// message.
	MaxConditionMessage = 4096
	// MaxWorkConditions is the most conditions of a Work.
	MaxWorkConditions = 8
	// MaxManifestStatuses is the most manifest statuses of a Work.
	MaxManifestStatuses = 64
	// MaxStatusProperties is the most top-level fields of one manifest's
	// reported status.
	MaxStatusProperties = 128
	// MaxReflectedStatus is the most bytes of JSON of one manifest's
	// reported status. The CRD cannot count the bytes of a free-form
	// field; the agent keeps to it and the hub drops a larger one when it
	// reads it.
	MaxReflectedStatus = 16 << 10
	// MaxReadyEndpoints is the most ready endpoints a Service's manifest
	// status reports: a count only says whether a backend serves, and a
	// bound keeps a lying member's number harmless.
	MaxReadyEndpoints = 1000000
)

// Bounds of what the hub writes from many clusters' reports.
const (
	// MaxClusterMessage is the most characters of one cluster's message the
	// hub copies into a binding (aggregatedStatus[].appliedMessage).
	MaxClusterMessage = 1024
	// MaxSummary is the most characters of a condition message the hub
	// joins from many clusters (FullyApplied, Scheduled); metav1.Condition
	// allows 32768.
	MaxSummary = 8192
	// AggregatedStatusBudget is the most bytes of reported status, over all
	// clusters, one binding (and its template) carries: each cluster gets
	// an equal share of it (at most MaxReflectedStatus, at least
	// MinStatusShare), so many clusters of large statuses still fit in an
	// object etcd stores (1.5 MiB).
	AggregatedStatusBudget = 512 << 10
	// MinStatusShare is the least share of AggregatedStatusBudget a cluster
	// gets however many clusters a binding has: room for any built-in
	// kind's trimmed status.
	MinStatusShare = 512
)

// StatusShare is how many bytes of reported status each of n clusters of
// one binding may carry.
func StatusShare(n int) int {
	if n <= 0 {
		return MaxReflectedStatus
	}
	return max(MinStatusShare, min(MaxReflectedStatus, AggregatedStatusBudget/n))
}

// Text makes s safe to copy into a shared object: invalid UTF-8 becomes
// U+FFFD, control characters (C0 — tab and newline included —, DEL, C1)
// and Unicode format characters (bidirectional overrides) become a space,
// and the result has at most limit characters, the last of them "…" when
// something was cut.
func Text(s string, limit int) string {
	if limit <= 0 {
		return ""
	}
	if len(s) <= limit && clean(s) {
		return s // at most len(s) characters
	}
	runes := []rune(strings.ToValidUTF8(s, "\uFFFD"))
	cut := len(runes) > limit
	if cut {
		runes = runes[:limit-1]
	}
	for i, r := range runes {
		if !Printable(r) {
			runes[i] = ' '
		}
	}
	if cut {
		return string(runes) + "…"
	}
	return string(runes)
}

// Truncate bounds s to at most maxBytes bytes of valid UTF-8: invalid
// UTF-8 becomes U+FFFD, and a longer s is cut on a character boundary, the
// last three bytes "…". It is the one way Flotilla cuts a message for an
// API field, a log or an answer whose limit is in bytes: a cut in the
// middle of a character would be stored as U+FFFD by the apiserver, so
// the stored message would never equal the computed one and a controller
// comparing the two would write it again on every sync. The result is a
// pure function of s and maxBytes, and Truncate(Truncate(s, n), n) ==
// Truncate(s, n). Unlike Text it keeps control characters: use Text for
// what reaches a terminal.
func Truncate(s string, maxBytes int) string {
	if maxBytes <= 0 {
		return ""
	}
	if len(s) <= maxBytes && utf8.ValidString(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxBytes {
		return s
	}
	const ellipsis = "…"
	if maxBytes < len(ellipsis) {
		return s[:runeStart(s, maxBytes)]
	}
	return s[:runeStart(s, maxBytes-len(ellipsis))] + ellipsis
}

// runeStart is the largest i <= n at which a character of the valid UTF-8
// s starts (len(s) > n).
func runeStart(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// clean: s is valid UTF-8 of printable characters only.
func clean(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || !Printable(r) {
			return false
		}
		i += size
	}
	return true
}

// Printable reports whether r may reach a terminal or a shared object as
// it is: not a control character (C0, DEL, C1) and not a Unicode format
// character (which can reorder what a terminal shows, e.g. U+202E).
func Printable(r rune) bool {
	return !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r)
}

// Join joins items with sep into at most limit characters: as many items
// as fit, in order, then "… and N more <what>" for the rest. Each item
// should itself be bounded (Text) so that one cannot crowd out the others.
func Join(items []string, sep string, limit int, what string) string {
	if all := strings.Join(items, sep); utf8.RuneCountInString(all) <= limit {
		return all
	}
	sepLen := utf8.RuneCountInString(sep)
	more := func(n int) string { return "… and " + strconv.Itoa(n) + " more " + what }
	used, k := 0, 0
	for k < len(items) {
		next := utf8.RuneCountInString(items[k])
		if k > 0 {
			next += sepLen
		}
		// items[:k+1] fit only with the note about the rest after them.
		if used+next+sepLen+utf8.RuneCountInString(more(len(items)-k-1)) > limit {
			break
		}
		used += next
		k++
	}
	out := more(len(items) - k)
	if k > 0 {
		out = strings.Join(items[:k], sep) + sep + out
	}
	return Text(out, limit)
}
