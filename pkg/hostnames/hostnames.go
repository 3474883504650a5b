// Package hostnames is the one canonical form of a DNS host name that the
// hub compares and publishes: who owns a MultiClusterIngress host is decided
// on it (pkg/hub/dnstraffic.Owners), and the embedded DNS server, the
// ExternalDNS DNSEndpoints and the ingress status all publish exactly it, so
// two spellings of one name can never be two owners' names.
//
// A canonical host is what a Kubernetes Ingress accepts as spec.rules[].host:
// lowercase LDH labels (RFC 1123: letters, digits and '-', not at either end
// of a label), an internationalized label as its A-label ("xn--..."), an
// optional leading wildcard label "*", no trailing dot, each label at most 63
// bytes and the name at most 253 (255 in wire format, RFC 1035 2.3.4).
// Canonical maps every spelling that names the same DNS name to it: ASCII
// case, surrounding whitespace, any number of trailing dots, presentation
// format escapes ("\." and "\DDD", RFC 1035 5.1) and U-labels (IDNA2008 with
// the UTS 46 lookup mapping, golang.org/x/net/idna).
package hostnames

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

const (
	// MaxLength is the longest canonical name: 253 bytes, which is 255 on
	// the wire with the length octets and the root label.
	MaxLength = 253
	// MaxLabelLength is the longest label (RFC 1035 2.3.4).
	MaxLabelLength = 63
	// maxInput bounds the input Canonical reads: every byte of a longest
	// name escaped as \DDD, or written as a 4-byte rune, with room for
	// whitespace. Longer input is refused before any work.
	maxInput = 4 * (MaxLength + 2) * 2
	// Wildcard is the wildcard label.
	Wildcard = "*"
)

// Pattern is a regular expression (RE2) matching exactly the canonical
// names of at most MaxLength bytes; the CRD's admission policy checks hosts
// with it (manifests/crds/validating-admission-policy.yaml), and a test
// keeps the two identical.
const Pattern = `^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`

// lookup maps U-labels to A-labels as a resolver does (RFC 5891 section 5,
// UTS 46 nontransitional), and checks A-labels by decoding them.
var lookup = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false), idna.VerifyDNSLength(true))

// Canonical returns the canonical form of host, or an error saying why it is
// not a host name. It is idempotent (Canonical of a canonical name is the
// name), reads at most a few kilobytes of host, and the error never quotes
// host (callers quote it, bounded, if they must).
func Canonical(host string) (string, error) {
	if len(host) > maxInput {
		return "", errors.New("longer than any DNS name")
	}
	if isCanonicalASCII(host) { // the common case, without allocating
		return host, nil
	}
	labels, err := split(strings.TrimSpace(host))
	if err != nil {
		return "", err
	}
	total := len(labels) - 1 // the dots
	for i, l := range labels {
		switch {
		case l == Wildcard && i == 0 && len(labels) > 1:
		case l == Wildcard:
			return "", errors.New(`a wildcard "*" is only a whole first label, followed by a name`)
		default:
			if labels[i], err = canonicalLabel(l); err != nil {
				return "", err
			}
		}
		total += len(labels[i])
	}
	if total > MaxLength {
		return "", fmt.Errorf("longer than %d bytes", MaxLength)
	}
	return strings.Join(labels, "."), nil
}

// split cuts a name in presentation format into its labels, decoding the
// escapes: a dot ends a label unless escaped, and trailing dots (the root,
// written once or more) are dropped.
func split(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	var labels []string
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if len(b) == 0 {
				if len(labels) > 0 && strings.Trim(s[i:], ".") == "" {
					return labels, nil // trailing dots
				}
				return nil, errors.New("has an empty label")
			}
			labels, b = append(labels, string(b)), b[:0]
			continue
		case c != '\\':
			b = append(b, c)
			continue
		}
		// An escape: \DDD is the byte of that decimal value, \X is X.
		if i+1 >= len(s) {
			return nil, errors.New(`ends in a lone "\"`)
		}
		if d := s[i+1]; d < '0' || d > '9' {
			b = append(b, d)
			i++
			continue
		}
		if i+3 >= len(s) {
			return nil, errors.New(`has an escape \DDD without three digits`)
		}
		v := 0
		for _, d := range []byte(s[i+1 : i+4]) {
			if d < '0' || d > '9' {
				return nil, errors.New(`has an escape \DDD without three digits`)
			}
			v = v*10 + int(d-'0')
		}
		if v > 255 {
			return nil, errors.New(`has an escape \DDD over 255`)
		}
		b = append(b, byte(v))
		i += 3
	}
	if len(b) == 0 { // s ended in the one dot that closed its last label
		return labels, nil
	}
	return append(labels, string(b)), nil
}

// canonicalLabel is one label (escapes decoded) in canonical form.
func canonicalLabel(l string) (string, error) {
	if strings.IndexByte(l, '.') >= 0 {
		return "", errors.New("has a label holding a dot")
	}
	if isASCII(l) {
		l = strings.ToLower(l)
		if !strings.HasPrefix(l, "xn--") {
			return l, checkLDH(l)
		}
	} else if !utf8.ValidString(l) {
		return "", errors.New("has a label that is neither ASCII nor UTF-8")
	}
	// A U-label, or an A-label to check: the lookup profile maps case and
	// width, decodes and re-encodes A-labels, and refuses what IDNA2008
	// does not allow.
	a, err := lookup.ToASCII(l)
	switch {
	case err != nil:
		return "", errors.New("has a label that is not a valid internationalized label (IDNA2008)")
	case a == "" || strings.IndexByte(a, '.') >= 0:
		return "", errors.New("has a label that maps to no label or to several")
	}
	return a, checkLDH(a)
}

// checkLDH checks an ASCII label is lowercase letters, digits and '-', not
// at either end, and at most MaxLabelLength bytes.
func checkLDH(l string) error {
	if len(l) > MaxLabelLength {
		return fmt.Errorf("has a label longer than %d bytes", MaxLabelLength)
	}
	if !isLDHLabel(l) {
		return errors.New("has a label other than lowercase letters, digits and '-' (not first or last)")
	}
	return nil
}

// isCanonicalASCII says whether s is already canonical, by Pattern's rules,
// without allocating.
func isCanonicalASCII(s string) bool {
	if len(s) == 0 || len(s) > MaxLength {
		return false
	}
	s = strings.TrimPrefix(s, "*.")
	for {
		i := strings.IndexByte(s, '.')
		l := s
		if i >= 0 {
			l = s[:i]
		}
		if len(l) > MaxLabelLength || !isLDHLabel(l) || strings.HasPrefix(l, "xn--") {
			return false // xn-- labels are checked by decoding them
		}
		if i < 0 {
			return true
		}
		s = s[i+1:]
	}
}

// isLDHLabel says whether l is a non-empty lowercase LDH label not starting
// or ending with '-'.
func isLDHLabel(l string) bool {
	if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// IsWildcard says whether a canonical name is a wildcard ("*.example.com").
func IsWildcard(name string) bool { return strings.HasPrefix(name, Wildcard+".") }

// Within says whether the canonical name is domain or a name under it
// ("a.example.com" and "*.example.com" are within "example.com";
// "badexample.com" is not).
func Within(name, domain string) bool {
	return name == domain || len(name) > len(domain) && name[len(name)-len(domain)-1] == '.' && strings.HasSuffix(name, domain)
}
