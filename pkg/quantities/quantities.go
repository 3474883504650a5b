/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package quantities bounds resource quantities (cpu, memory, any
// ResourceList value) that an untrusted party wrote — a tenant's manifest,
// a customization's output, a member's resource summary — before the hub
// or the agent computes with them.
//
// resource.ParseQuantity accepts strings whose cost is unbounded: a 10-byte
// "1e-10000000" takes seconds to parse (it is rounded to nano scale with a
// 10^N big integer), and "1e10000000" parses at once but makes every later
// Add, Cmp or MilliValue compute 10^N. Its exponent is also read as int64
// and cut to int32, so "1e4294967296" is 1. And MilliValue wraps past
// int64. Parse refuses all of these by the string's syntax first (length,
// exponent) and then by value (Max), so that what it accepts is cheap to
// parse and to compute with, and its milli-value fits an int64.
package quantities

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// MaxMilli is the largest milli-value accepted (9·10^18 < 2^63−1 ≈
	// 9.22·10^18), so that MilliValue of any accepted quantity, the unit
	// the scheduler computes in, fits an int64 without wrapping.
	MaxMilli int64 = 9_000_000_000_000_000_000

	// Max is the largest magnitude accepted, in the resource's own unit
	// (cores, bytes, pods): 9·10^15, i.e. 9P. That is ~8 PiB of memory or
	// 9·10^15 cores, past any real cluster's total of either; a sum above
	// it (a member with absurd nodes) is clamped to it by the agent and
	// refused in a pod's requests.
	Max = MaxMilli / 1000

	// MaxLength is the longest quantity string accepted. Canonical
	// quantities within Max have at most 26 characters
	// ("9000000000000000000000001n"); a longer string is either padding or
	// a parse-cost attack (a million digits).
	MaxLength = 64

	// MaxExponent bounds the decimal exponent of "<number>e<exponent>":
	// 10^±99 is far outside Max and nano precision either way, and keeps
	// ParseQuantity's big-integer work to a few hundred digits.
	MaxExponent = 99
)

// CRDPattern is the OpenAPI pattern of every quantity in Flotilla's own
// CRDs (a Cluster's status.resourceSummary, a binding's
// replicaRequirements), with maxLength MaxLength: Kubernetes' quantity
// syntax without a minus sign and with an exponent within ±MaxExponent.
// The apiserver then refuses, before anything is stored, the strings
// whose decoding alone (Quantity.UnmarshalJSON) would cost the hub's
// informer seconds; the range (Max) is checked where they are used.
// hack/update-codegen.sh puts it in the generated CRDs.
const CRDPattern = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?0*[0-9]{1,2}))?$`

// Error is a quantity refused, with where it was found.
type Error struct {
	// Path is the field path, e.g.
	// spec.template.spec.containers[0].resources.requests.cpu; empty when
	// the caller has none.
	Path string
	// Value is the quantity as written (the error cuts it to MaxLength
	// characters), or, for a decoded quantity, its approximate value.
	Value string
	// Reason says why, e.g. "out of range: the exponent is beyond ±99".
	Reason string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%.*q: %s", MaxLength, e.Value, e.Reason)
	if e.Path != "" {
		return e.Path + ": " + s
	}
	return s
}

// The reasons of Error.
var (
	reasonTooLong  = fmt.Sprintf("out of range: longer than %d characters", MaxLength)
	reasonExponent = fmt.Sprintf("out of range: the exponent is beyond ±%d", MaxExponent)
	reasonRange    = fmt.Sprintf("out of range: the magnitude is above %dP (%d)", Max/1_000_000_000_000_000, Max)
	reasonNegative = "out of range: negative"
	reasonSyntax   = "not a quantity"
)

// Parse is resource.ParseQuantity for an untrusted string: it refuses s
// when it is longer than MaxLength, when its exponent is beyond
// ±MaxExponent (both before parsing), when ParseQuantity refuses it, and
// when its milli-value is beyond ±MaxMilli. Every string of at most
// MaxLength bytes with an exponent within ±MaxExponent that ParseQuantity
// accepts, and whose value is within ±Max, is accepted, with the same
// value. The error is an *Error (without a Path).
func Parse(s string) (resource.Quantity, error) {
	if len(s) > MaxLength {
		return resource.Quantity{}, &Error{Value: s, Reason: reasonTooLong}
	}
	if !exponentWithin(s) {
		return resource.Quantity{}, &Error{Value: s, Reason: reasonExponent}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, &Error{Value: s, Reason: reasonSyntax}
	}
	if _, ok := milli(&q); !ok {
		return resource.Quantity{}, &Error{Value: s, Reason: reasonRange}
	}
	return q, nil
}

// Milli is q's milli-value, 1000·q rounded away from zero (as
// q.MilliValue() rounds a positive q up), or an *Error when it is beyond
// ±MaxMilli. (q.MilliValue() itself gives +1 for a -1n parsed from
// "-1e-10" and -1 for one parsed from "-1e-9".) It is for quantities decoded elsewhere
// (an informer's typed objects): it computes no power of ten, whatever
// q's exponent, for every quantity that went through ParseQuantity — which
// every JSON, CBOR and protobuf decoding of a Quantity does, and which
// keeps at most nano precision.
func Milli(q *resource.Quantity) (int64, error) {
	m, ok := milli(q)
	if !ok {
		return 0, &Error{Value: strconv.FormatFloat(q.AsApproximateFloat64(), 'g', 4, 64), Reason: reasonRange}
	}
	return m, nil
}

// NonNegativeMilli is Milli that also refuses a negative quantity, however
// small (a summary's allocated or allocating below zero would add room; a
// binding's CRD admits no negative requirement).
func NonNegativeMilli(q *resource.Quantity) (int64, error) {
	m, err := Milli(q)
	if err == nil && q.Sign() < 0 {
		return 0, &Error{Value: q.String(), Reason: reasonNegative}
	}
	return m, err
}

// screen is the approximate magnitude past which a quantity is refused
// without computing its exact value: above Max by more than the float's
// error, below the magnitude whose milli-value would wrap an int64.
const screen = 9.1e15

func milli(q *resource.Quantity) (int64, bool) {
	// A zero may carry any exponent ("0e10000000"); comparing it or
	// scaling it would loop over that exponent.
	if q.IsZero() {
		return 0, true
	}
	// An approximate float costs no power of ten (math.Pow10 for the
	// int64 form; a linear conversion of the digits for the decimal
	// one); NaN fails the comparison too. Past the screen the value is
	// small enough (|q| < 9.1·10^15 with at most nano precision) that
	// MilliValue neither loops long nor wraps.
	if f := q.AsApproximateFloat64(); !(math.Abs(f) <= screen) {
		return 0, false
	}
	var m int64
	if q.Sign() < 0 {
		// MilliValue's ceiling is not symmetric, and its decimal form
		// gets the sign of a sub-milli negative value wrong.
		abs := q.DeepCopy()
		abs.Neg()
		m = -abs.MilliValue()
	} else {
		m = q.MilliValue()
	}
	if m > MaxMilli || m < -MaxMilli {
		return 0, false
	}
	return m, true
}

// exponentWithin says whether s, read as ParseQuantity reads it, has no
// decimal exponent ("1e5", "2E-3") beyond ±MaxExponent. A string that is
// not a quantity at all passes here and is refused by ParseQuantity.
func exponentWithin(s string) bool {
	// The number: sign, digits, fraction (parseQuantityString's scan).
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	suffix := s[i:]
	// "Ei" is the binary exa suffix and "E" the decimal one; any other
	// suffix of two or more characters starting with e or E is an
	// exponent, read by strconv.ParseInt (sign, leading zeros).
	if len(suffix) < 2 || (suffix[0] != 'e' && suffix[0] != 'E') || suffix == "Ei" {
		return true
	}
	exp := suffix[1:]
	if exp[0] == '+' || exp[0] == '-' {
		exp = exp[1:]
	}
	value := 0
	for j := 0; j < len(exp); j++ {
		if !isDigit(exp[j]) {
			return true // not an exponent: ParseQuantity refuses it
		}
		value = value*10 + int(exp[j]-'0')
		if value > MaxExponent {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
