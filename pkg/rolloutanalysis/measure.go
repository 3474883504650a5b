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

package rolloutanalysis

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Bounds of a measurement.
const (
	// MaxResponseBytes bounds a Prometheus response body.
	MaxResponseBytes = 1 << 20
	// maxResponseHeaderBytes bounds its headers.
	maxResponseHeaderBytes = 64 << 10
	// MaxQueryBytes bounds the query after {{clusters}} substitution.
	MaxQueryBytes = 256 << 10
	// DefaultTimeout is the per-query timeout when Options.Timeout is 0.
	DefaultTimeout = 10 * time.Second
)

// NoAddressMessage is the message of every measurement of a Runner without
// a Prometheus address.
const NoAddressMessage = "no Prometheus address configured (--rollout-prometheus-address)"

// result is a measurement's outcome.
type result int

const (
	resultSuccess result = iota
	resultFailure
	resultInconclusive
)

func (r result) String() string {
	switch r {
	case resultSuccess:
		return "success"
	case resultFailure:
		return "failure"
	default:
		return "inconclusive"
	}
}

// outcome is a measurement's result and what it says.
type outcome struct {
	result  result
	message string
}

func inconclusive(format string, args ...any) outcome {
	return outcome{result: resultInconclusive, message: fmt.Sprintf(format, args...)}
}

// clustersRegexp is the regular expression matching exactly names (sorted,
// unique).
func clustersRegexp(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "(?:" + strings.Join(quoted, "|") + ")"
}

// buildQuery replaces every {{clusters}} of the template with the regular
// expression of clusters, escaped for the string literal it stands in.
func buildQuery(template string, clusters []string) (string, error) {
	phs, err := scanTemplate(template)
	if err != nil {
		return "", err
	}
	if len(phs) == 0 {
		return template, nil
	}
	re := clustersRegexp(clusters)
	var b strings.Builder
	last := 0
	for _, p := range phs {
		var sub string
		switch p.context {
		case ctxDouble, ctxSingle:
			sub = escapeQuoted(re, p.context)
		case ctxRaw:
			if strings.ContainsRune(re, '`') {
				return "", errors.New("a cluster name contains a backquote: it cannot stand in a `raw` string")
			}
			sub = re
		default:
			sub = re
		}
		if b.Len()+(p.offset-last)+len(sub) > MaxQueryBytes {
			return "", fmt.Errorf("the query is longer than %d bytes once %s is replaced (%d clusters)", MaxQueryBytes, ClustersPlaceholder, len(clusters))
		}
		b.WriteString(template[last:p.offset])
		b.WriteString(sub)
		last = p.offset + len(ClustersPlaceholder)
	}
	if b.Len()+len(template)-last > MaxQueryBytes {
		return "", fmt.Errorf("the query is longer than %d bytes once %s is replaced (%d clusters)", MaxQueryBytes, ClustersPlaceholder, len(clusters))
	}
	b.WriteString(template[last:])
	return b.String(), nil
}

// escapeQuoted escapes s for the inside of a PromQL string quoted by quote
// (Go's escapes, as PromQL's lexer reads them).
func escapeQuoted(s string, quote byte) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteByte(quote)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// newAPI returns the Prometheus API client of address, or a message saying
// why every measurement is inconclusive.
func newAPI(address string, rt http.RoundTripper, timeout time.Duration) (promv1.API, string) {
	if address == "" {
		return nil, NoAddressMessage
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, truncate(fmt.Sprintf("invalid Prometheus address %q (--rollout-prometheus-address): want http(s)://host[:port][/path]", address), MaxMessageBytes)
	}
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxResponseHeaderBytes = maxResponseHeaderBytes
		t.MaxIdleConnsPerHost = MaxInFlight
		rt = t
	}
	client, err := promapi.NewClient(promapi.Config{
		Address: address,
		Client:  &http.Client{Transport: limitedTransport{rt}, Timeout: timeout + 5*time.Second},
	})
	if err != nil {
		return nil, truncate(fmt.Sprintf("invalid Prometheus address %q (--rollout-prometheus-address): %v", address, err), MaxMessageBytes)
	}
	return promv1.NewAPI(client), ""
}

// limitedTransport bounds every response body to MaxResponseBytes.
type limitedTransport struct{ base http.RoundTripper }

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{r: resp.Body, n: MaxResponseBytes}
	return resp, nil
}

var errBodyTooLarge = fmt.Errorf("the response is larger than %d bytes", MaxResponseBytes)

// limitedBody reads at most n bytes, then fails with errBodyTooLarge if
// there are more.
type limitedBody struct {
	r io.ReadCloser
	n int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.n <= 0 {
		var one [1]byte
		for range 100 {
			k, err := b.r.Read(one[:])
			if k > 0 {
				return 0, errBodyTooLarge
			}
			if err != nil {
				return 0, err
			}
		}
		return 0, io.ErrNoProgress
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	k, err := b.r.Read(p)
	b.n -= int64(k)
	return k, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// formatValue writes a value as Prometheus does.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// valueOf is the result of a query's value; ok false says why there is
// none.
func valueOf(v model.Value) (float64, string, bool) {
	var f float64
	var what string
	switch v := v.(type) {
	case *model.Scalar:
		if v == nil {
			return 0, "Prometheus returned no value", false
		}
		f = float64(v.Value)
	case model.Vector:
		if len(v) == 0 {
			return 0, "the query returned an empty vector (no series matched)", false
		}
		// The first sample by label set, for a stable answer whatever
		// order Prometheus returns them in.
		var s *model.Sample
		var first string
		n := 0
		for _, c := range v {
			if c == nil {
				continue
			}
			n++
			if k := c.Metric.String(); s == nil || k < first {
				s, first = c, k
			}
		}
		if s == nil {
			return 0, "the query returned an empty vector (no series matched)", false
		}
		if s.Histogram != nil {
			return 0, fmt.Sprintf("the first sample %s is a native histogram, not a number", s.Metric), false
		}
		f = float64(s.Value)
		switch {
		case n == 1 && len(s.Metric) == 0:
		case n == 1:
			what = "the sample " + first
		default:
			what = fmt.Sprintf("the first of %d samples, %s", n, first)
		}
	case model.Matrix:
		return 0, "the query returned a range vector (matrix); an analysis needs a scalar or an instant vector", false
	case *model.String:
		return 0, "the query returned a string; an analysis needs a scalar or an instant vector", false
	case nil:
		return 0, "Prometheus returned no value", false
	default:
		return 0, fmt.Sprintf("the query returned a %s; an analysis needs a scalar or an instant vector", v.Type()), false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		if what != "" {
			what = " (" + what + ")"
		}
		return 0, fmt.Sprintf("result %s%s is not a finite number", formatValue(f), what), false
	}
	return f, what, true
}

// evaluate runs the conditions over v; what says where v comes from.
func evaluate(c *conditions, v float64, what string) outcome {
	vs := formatValue(v)
	if what != "" {
		vs += " (" + what + ")"
	}
	ok, err := evalBool(c.success, v)
	if err != nil {
		return inconclusive("result %s: successCondition: evaluation failed: %v", vs, err)
	}
	if ok {
		return outcome{result: resultSuccess, message: "result " + vs + ": successCondition holds"}
	}
	if c.failure == nil {
		return inconclusive("result %s: successCondition does not hold (no failureCondition)", vs)
	}
	ok, err = evalBool(c.failure, v)
	if err != nil {
		return inconclusive("result %s: failureCondition: evaluation failed: %v", vs, err)
	}
	if ok {
		return outcome{result: resultFailure, message: "result " + vs + ": failureCondition holds"}
	}
	return inconclusive("result %s: neither successCondition nor failureCondition holds", vs)
}

func evalBool(p cel.Program, v float64) (bool, error) {
	out, _, err := p.Eval(map[string]any{ResultVariable: v})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("returned %s, not bool", out.Type().TypeName())
	}
	return b, nil
}
