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
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Limits on an analysis' tenant input.
const (
	// MaxConditionLength bounds each CEL condition, in characters (the
	// API's MaxLength).
	MaxConditionLength = 1024
	// MaxQueryLength bounds the query template, in characters (the API's
	// MaxLength).
	MaxQueryLength = 4096
	// CostLimit is the runtime cost limit of one condition's evaluation,
	// and the bound on its static cost estimate.
	CostLimit = 100000
	// parserRecursionLimit bounds the nesting of a condition.
	parserRecursionLimit = 32
	// maxErrorBytes bounds Validate's messages.
	maxErrorBytes = 1024
)

// ClustersPlaceholder is what a query's template has replaced by the
// regular expression of the group's cluster names.
const ClustersPlaceholder = "{{clusters}}"

// ResultVariable is the CEL variable holding the measured value.
const ResultVariable = "result"

var (
	envOnce sync.Once
	celEnv  *cel.Env
	envErr  error
)

// environment is the CEL environment of both conditions: the standard
// library and result, a double.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		celEnv, envErr = cel.NewEnv(
			cel.Variable(ResultVariable, cel.DoubleType),
			// result < 1 as well as result < 1.0.
			cel.CrossTypeNumericComparisons(true),
			cel.ParserRecursionLimit(parserRecursionLimit),
			cel.ParserExpressionSizeLimit(MaxConditionLength),
		)
	})
	return celEnv, envErr
}

// noSizes makes the static estimate assume nothing beyond the checker's
// defaults: the only input is a double.
type noSizes struct{}

func (noSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (noSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// compileCondition compiles one condition; field names it in errors.
func compileCondition(field, src string) (cel.Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("%s: must not be empty", field)
	}
	if n := utf8.RuneCountInString(src); n > MaxConditionLength {
		return nil, fmt.Errorf("%s: %d characters, at most %d", field, n, MaxConditionLength)
	}
	env, err := environment()
	if err != nil {
		return nil, fmt.Errorf("%s: CEL environment: %v", field, err)
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		msg := iss.String()
		if strings.Contains(msg, "(double, int)") || strings.Contains(msg, "(double, list(int))") {
			msg += "\n(result is a double: compare it with 0.0, not 0)"
		}
		return nil, fmt.Errorf("%s: compilation failed: %s", field, msg)
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("%s: must evaluate to bool, not %s", field, ast.OutputType())
	}
	est, err := env.EstimateCost(ast, noSizes{})
	if err != nil {
		return nil, fmt.Errorf("%s: cost estimation failed: %v", field, err)
	}
	if est.Max > CostLimit {
		return nil, fmt.Errorf("%s: estimated cost %d exceeds the limit of %d", field, est.Max, CostLimit)
	}
	prog, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%s: program instantiation failed: %v", field, err)
	}
	return prog, nil
}

// conditions are an analysis' compiled conditions.
type conditions struct {
	success cel.Program
	failure cel.Program // nil: no failureCondition
}

func compileConditions(spec policyv1alpha1.RolloutAnalysis) (*conditions, error) {
	s, err := compileCondition("successCondition", spec.SuccessCondition)
	if err != nil {
		return nil, err
	}
	c := &conditions{success: s}
	if spec.FailureCondition != "" {
		if c.failure, err = compileCondition("failureCondition", spec.FailureCondition); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Validate checks an analysis: both conditions compile to bool within the
// cost limit, the query template is well formed ({{clusters}} only, inside
// string literals), and interval, count and failureLimit are in range. The
// error's message is at most 1024 bytes.
func Validate(spec policyv1alpha1.RolloutAnalysis) error {
	var errs []string
	if err := checkQuery(spec.Prometheus.Query); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := compileCondition("successCondition", spec.SuccessCondition); err != nil {
		errs = append(errs, err.Error())
	}
	if spec.FailureCondition != "" {
		if _, err := compileCondition("failureCondition", spec.FailureCondition); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if spec.Interval != nil && spec.Interval.Duration < MinInterval {
		errs = append(errs, fmt.Sprintf("interval: %s, at least %s", spec.Interval.Duration, MinInterval))
	}
	if spec.Count != nil && (*spec.Count < 1 || *spec.Count > 100) {
		errs = append(errs, fmt.Sprintf("count: %d, must be 1 to 100", *spec.Count))
	}
	if spec.FailureLimit != nil && (*spec.FailureLimit < 0 || *spec.FailureLimit > 100) {
		errs = append(errs, fmt.Sprintf("failureLimit: %d, must be 0 to 100", *spec.FailureLimit))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(truncate("analysis: "+strings.Join(errs, "; "), maxErrorBytes))
}

// MinInterval and DefaultInterval bound and default spec.Interval.
const (
	MinInterval     = time.Second
	DefaultInterval = 30 * time.Second
)

// checkQuery checks the query template.
func checkQuery(q string) error {
	if strings.TrimSpace(q) == "" {
		return errors.New("prometheus.query: must not be empty")
	}
	if n := utf8.RuneCountInString(q); n > MaxQueryLength {
		return fmt.Errorf("prometheus.query: %d characters, at most %d", n, MaxQueryLength)
	}
	phs, err := scanTemplate(q)
	if err != nil {
		return fmt.Errorf("prometheus.query: %v", err)
	}
	for _, p := range phs {
		if p.context == ctxCode {
			return fmt.Errorf("prometheus.query: %s at offset %d is outside a string literal; use it in a label matcher such as cluster=~\"%s\"",
				ClustersPlaceholder, p.offset, ClustersPlaceholder)
		}
	}
	return nil
}

// Where a placeholder stands in the query.
const (
	ctxCode    = 0    // PromQL code, outside any string
	ctxComment = '#'  // a comment
	ctxRaw     = '`'  // a raw string
	ctxDouble  = '"'  // a "..." string
	ctxSingle  = '\'' // a '...' string
)

type placeholder struct {
	offset  int
	context byte
}

// otherPlaceholder matches what looks like a template placeholder.
var otherPlaceholder = regexp.MustCompile(`^\{\{\s*[A-Za-z_][A-Za-z0-9_.]*\s*\}\}`)

// scanTemplate finds every {{clusters}} in q with the lexical context it is
// in (PromQL's strings: "..." and '...' with backslash escapes, `...` raw;
// comments from # to the end of the line). It refuses other placeholders
// and an unterminated string.
func scanTemplate(q string) ([]placeholder, error) {
	var out []placeholder
	var ctx byte = ctxCode
	start := 0
	for i := 0; i < len(q); {
		if strings.HasPrefix(q[i:], "{{") {
			if strings.HasPrefix(q[i:], ClustersPlaceholder) {
				out = append(out, placeholder{offset: i, context: ctx})
				i += len(ClustersPlaceholder)
				continue
			}
			if m := otherPlaceholder.FindString(q[i:]); m != "" {
				return nil, fmt.Errorf("unknown placeholder %q at offset %d: only %s is replaced", m, i, ClustersPlaceholder)
			}
		}
		c := q[i]
		switch ctx {
		case ctxCode:
			switch c {
			case '"', '\'', '`':
				ctx, start = c, i
			case '#':
				ctx = ctxComment
			}
		case ctxComment:
			if c == '\n' {
				ctx = ctxCode
			}
		case ctxRaw:
			if c == '`' {
				ctx = ctxCode
			}
		default: // ctxDouble, ctxSingle
			switch c {
			case '\\':
				i += 2
				continue
			case ctx:
				ctx = ctxCode
			case '\n':
				return nil, fmt.Errorf("unterminated string at offset %d", start)
			}
		}
		i++
	}
	if ctx != ctxCode && ctx != ctxComment {
		return nil, fmt.Errorf("unterminated string at offset %d", start)
	}
	return out, nil
}

// truncate cuts s to at most n bytes on a UTF-8 boundary, after making it
// valid UTF-8.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
