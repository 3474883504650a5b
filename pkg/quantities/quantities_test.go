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

package quantities

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// costly are strings every CRD quantity pattern admits whose parse, or
// whose first arithmetic, takes seconds to minutes in ParseQuantity.
var costly = []string{
	"1e-10000000", "1e10000000", "0e10000000", "0e-10000000", "1E-10000000",
	"1e-1000000", "9e+0000000000000000000000000000000000000000000000000000000000099999",
	"1e4294967296", // ParseQuantity cuts the exponent to int32: 1
	"1" + strings.Repeat("0", 100000),
}

// withinDeadline returns f's error, and fails t at once when f has not
// returned within d. The deadline is a hang detector, not a speed
// assertion: the bounded calls take microseconds, the unbounded ones
// seconds to minutes.
func withinDeadline(t testing.TB, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: not returned within %s", what, d)
		return nil
	}
}

func TestParseRefusesCostlyStrings(t *testing.T) {
	for _, s := range costly {
		err := withinDeadline(t, 5*time.Second, "Parse("+s[:min(len(s), 20)]+")", func() error {
			_, err := Parse(s)
			return err
		})
		if e := (*Error)(nil); !errors.As(err, &e) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Parse(%.20q): %v; want an *Error saying out of range", s, err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in    string
		milli int64  // when accepted
		err   string // part of the error, "" when accepted
	}{
		{in: "500m", milli: 500},
		{in: "2", milli: 2000},
		{in: "1Gi", milli: 1 << 30 * 1000},
		{in: "1.5Ki", milli: 1536 * 1000},
		{in: "1n", milli: 1},
		{in: "1e-99", milli: 1}, // rounded up to 1n, as ParseQuantity does
		{in: "1e3", milli: 1_000_000},
		{in: "1e+015", milli: 1e18},
		{in: "-2", milli: -2000},
		{in: "9P", milli: MaxMilli},
		{in: "9000000000000000", milli: MaxMilli},
		{in: "-9P", milli: -MaxMilli},
		{in: "0e10000000", err: "exponent"},
		{in: "1e100", err: "exponent"},
		{in: "1e-100", err: "exponent"},
		{in: "9000000000000001", err: "magnitude"},
		{in: "9.000000000000001P", err: "magnitude"},
		{in: "8Ei", err: "magnitude"},
		{in: "1E", err: "magnitude"}, // decimal exa
		{in: "1e16", err: "magnitude"},
		{in: "9223372036854775807", err: "magnitude"},
		{in: strings.Repeat("1", 65), err: "longer than 64"},
		{in: "abc", err: "not a quantity"},
		{in: "", err: "not a quantity"},
		{in: "1e", err: "not a quantity"},
		{in: "1e1.5", err: "not a quantity"},
	} {
		q, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %s, %v; want an error saying %q", c.in, q.String(), err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := q.MilliValue(); got != c.milli {
			t.Errorf("Parse(%q).MilliValue() = %d, want %d", c.in, got, c.milli)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Parse("1e-10000000")
	e := err.(*Error)
	e.Path = "spec.template.spec.containers[0].resources.requests.cpu"
	want := `spec.template.spec.containers[0].resources.requests.cpu: "1e-10000000": out of range: the exponent is beyond ±99`
	if got := err.Error(); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	_, err = Parse(strings.Repeat("9", 1000))
	if got := err.Error(); len(got) > 200 {
		t.Errorf("message of a long value not cut: %d bytes", len(got))
	}
}

// Milli of quantities decoded elsewhere (an informer's objects), each
// within the deadline: ParseQuantity built them, the check must not then
// compute their powers of ten.
func TestMilliOfDecodedQuantities(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0e10000000", 0, true},
		{"0e-10000000", 0, true},
		{"1e10000000", 0, false},
		{"-1e10000000", 0, false},
		{"1" + strings.Repeat("0", 30) + "e-10", 0, false},
		{"1e18", 0, false},
		{"100m", 100, true},
		{"9P", MaxMilli, true},
	} {
		q, err := resource.ParseQuantity(c.in)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		err = withinDeadline(t, 5*time.Second, "Milli("+c.in+")", func() error {
			var err error
			got, err = Milli(&q)
			return err
		})
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Milli(%s) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	for _, s := range []string{"-1", "-1e-10", "-1e-9"} {
		neg := resource.MustParse(s)
		if _, err := NonNegativeMilli(&neg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("NonNegativeMilli(%s): %v, want negative refused", s, err)
		}
		// Rounded away from zero, whatever the representation
		// (MilliValue says +1 for the first -1n, -1 for the second).
		if m, err := Milli(&neg); err != nil || m >= 0 {
			t.Errorf("Milli(%s) = %d, %v; want negative", s, m, err)
		}
	}
}

// kubernetesPattern is the apiserver's and controller-gen's syntax of a
// quantity string (resource.Quantity's OpenAPI pattern).
var kubernetesPattern = regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)

var crdPattern = regexp.MustCompile(CRDPattern)

func mustMilli(t *testing.T, q *resource.Quantity) int64 {
	t.Helper()
	m, err := Milli(q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fastest is how long f takes, the shortest of up to three runs: a call
// that is slow by its input is slow every time; one slowed by the machine
// (a GC pause, another process) is not. Fuzz targets bound it.
func fastest(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
		if best <= 10*time.Millisecond {
			break
		}
	}
	return best
}

// FuzzParseQuantity: for any string, Parse does not panic, returns within
// a bound and allocates little; what it accepts has a milli-value within
// ±MaxMilli that round-trips (the canonical string parses back to the
// same value); and it accepts every string ParseQuantity accepts cheaply
// within range (at most MaxLength bytes, exponent within ±MaxExponent,
// value within Max), with ParseQuantity's value. It also holds Milli on
// whatever ParseQuantity made of the string, when that parse is cheap.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range append(costly[:len(costly)-1],
		"0", "1", "500m", "1Gi", "1.5Ki", "1n", "1e-99", "1e+015", "-2", "9P", "-9P", "9000000000000001",
		"8Ei", ".5", "1.", "+1", "-", ".", "1e", "1Ee5", "1e+-5", "99999999999999999999e-10", "0.0000000001") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var q resource.Quantity
		var err error
		if d := fastest(func() { q, err = Parse(s) }); d > 100*time.Millisecond {
			t.Fatalf("Parse(%.40q) took %s", s, d)
		}
		if allocs := testing.AllocsPerRun(1, func() { _, _ = Parse(s) }); allocs > 64 {
			t.Fatalf("Parse(%.40q) made %.0f allocations", s, allocs)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%.40q): %v is not an *Error", s, err)
			}
		} else {
			m, merr := Milli(&q)
			if merr != nil || m > MaxMilli || m < -MaxMilli || (m < 0) != (q.Sign() < 0) && m != 0 {
				t.Fatalf("Parse(%q) accepted milli-value %d (%v) beyond ±%d or of the wrong sign", s, m, merr, MaxMilli)
			}
			back, err := Parse(q.String())
			if err != nil {
				t.Fatalf("Parse(%q) = %s, which Parse refuses: %v", s, q.String(), err)
			}
			if bm, _ := Milli(&back); bm != m || back.Cmp(q) != 0 {
				t.Fatalf("Parse(%q) = %s does not round-trip: %s", s, q.String(), back.String())
			}
		}
		if len(s) > MaxLength || !exponentWithin(s) {
			return // ParseQuantity may be costly: not called here
		}
		pq, perr := resource.ParseQuantity(s)
		if perr != nil {
			if err == nil {
				t.Fatalf("Parse(%q) accepted what ParseQuantity refuses: %v", s, perr)
			}
			return
		}
		inRange := pq.IsZero() || math.Abs(pq.AsApproximateFloat64()) < 8.9e15
		if inRange && err != nil {
			t.Fatalf("Parse(%q) refused a cheap in-range quantity: %v", s, err)
		}
		if err == nil && pq.Cmp(q) != 0 {
			t.Fatalf("Parse(%q) = %s, ParseQuantity says %s", s, q.String(), pq.String())
		}
		if m, merr := Milli(&pq); (merr == nil) != (err == nil) || (merr == nil && m != mustMilli(t, &q)) {
			t.Fatalf("Milli(ParseQuantity(%q)) = %d, %v; Parse said %v", s, m, merr, err)
		}
		// Parse's syntax is wider than Kubernetes' pattern (it takes what
		// ParseQuantity takes, e.g. "."); the CRDs' CRDPattern is
		// narrower than both.
		if crdPattern.MatchString(s) && err != nil && inRange {
			t.Fatalf("%q matches CRDPattern but Parse refuses it: %v", s, err)
		}
		if crdPattern.MatchString(s) && !kubernetesPattern.MatchString(s) {
			t.Fatalf("%q matches CRDPattern but not Kubernetes' quantity pattern", s)
		}
	})
}
