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

package customization

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// evalWithin returns f's results, failing t at once when f has not
// returned within d: a hang detector (a bounded evaluation takes
// microseconds; quantity("1e-10000000") seconds), not a speed assertion.
func evalWithin[T any](t testing.TB, d time.Duration, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(d):
		t.Fatalf("%s: not returned within %s", what, d)
		var zero T
		return zero, nil
	}
}

// quantity() and isQuantity() of Kubernetes' CEL library parse their
// argument with resource.ParseQuantity: on a tenant's field holding
// "1e-10000000" one call takes seconds, whatever the cost limit (the
// call's cost is counted after it returns). In a customization they
// take what quantities.Parse takes (issue 36).
func TestQuantityArgumentsAreBounded(t *testing.T) {
	rules, errs := Compile(ric(health(`quantity(object.spec.cpu).isLessThan(quantity("2")) ? "Healthy" : "Unhealthy"`)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct {
		cpu  string
		want workv1alpha1.ResourceHealth
		err  string // part of the error, "" for none
	}{
		{"500m", workv1alpha1.ResourceHealthy, ""},
		{"3", workv1alpha1.ResourceUnhealthy, ""},
		{"1e-10000000", workv1alpha1.ResourceUnknown, `"1e-10000000": out of range`},
		{"1e10000000", workv1alpha1.ResourceUnknown, `"1e10000000": out of range`},
		{"0e10000000", workv1alpha1.ResourceUnknown, `"0e10000000": out of range`},
		{"lots", workv1alpha1.ResourceUnknown, "not a quantity"},
	} {
		o := map[string]any{"spec": map[string]any{"cpu": c.cpu}}
		h, err := evalWithin(t, 5*time.Second, "quantity("+c.cpu+")", func() (workv1alpha1.ResourceHealth, error) {
			return rules.Health.EvalHealth(o)
		})
		if h != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("cpu %s: health %s, %v; want %s and an error saying %q", c.cpu, h, err, c.want, c.err)
		}
	}

	is, errs := Compile(ric(health(`isQuantity(object.spec.cpu)`)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for cpu, want := range map[string]workv1alpha1.ResourceHealth{
		"500m":        workv1alpha1.ResourceHealthy,
		"lots":        workv1alpha1.ResourceUnhealthy,
		"1e-10000000": workv1alpha1.ResourceUnhealthy, // quantity() refuses it
		"1e10000000":  workv1alpha1.ResourceUnhealthy,
	} {
		o := map[string]any{"spec": map[string]any{"cpu": cpu}}
		h, err := evalWithin(t, 5*time.Second, "isQuantity("+cpu+")", func() (workv1alpha1.ResourceHealth, error) {
			return is.Health.EvalHealth(o)
		})
		if h != want || err != nil {
			t.Errorf("isQuantity(%q): %s, %v; want %s", cpu, h, err, want)
		}
	}
}

// A literal too, and inside a comprehension over the object's list.
func TestQuantityLiteralAndComprehensionAreBounded(t *testing.T) {
	rules, errs := Compile(ric(health(`object.spec.items.all(x, !quantity(x).isLessThan(quantity("0"))) && quantity("1e-10000000").isGreaterThan(quantity("0"))`)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	o := map[string]any{"spec": map[string]any{"items": []any{"1", "2e-99", "3"}}}
	_, err := evalWithin(t, 5*time.Second, "literal", func() (workv1alpha1.ResourceHealth, error) { return rules.Health.EvalHealth(o) })
	if err == nil || !strings.Contains(err.Error(), `"1e-10000000": out of range`) {
		t.Errorf("literal 1e-10000000: %v; want out of range", err)
	}
	o = map[string]any{"spec": map[string]any{"items": []any{"1", "1e10000000"}}}
	_, err = evalWithin(t, 5*time.Second, "comprehension", func() (workv1alpha1.ResourceHealth, error) { return rules.Health.EvalHealth(o) })
	if err == nil || !strings.Contains(err.Error(), `"1e10000000": out of range`) {
		t.Errorf("item 1e10000000: %v; want out of range", err)
	}
}

// podTemplateDependencies() reads the tenant's pod template, divisors
// included: bounded before the conversion parses them.
func TestPodTemplateDependenciesBoundsQuantities(t *testing.T) {
	e := compileDependencies(t, `podTemplateDependencies(object.spec.template)`)
	o := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "a", "env": []any{map[string]any{"name": "E", "valueFrom": map[string]any{
			"resourceFieldRef": map[string]any{"resource": "limits.cpu", "divisor": "1e-10000000"}}}}}}}}}}
	_, err := evalWithin(t, 5*time.Second, "podTemplateDependencies", func() ([]any, error) { return e.EvalList(o) })
	if qe := (*quantities.Error)(nil); err == nil || !strings.Contains(err.Error(), "divisor") || errors.As(err, &qe) && qe.Path == "" {
		t.Errorf("podTemplateDependencies: %v; want the divisor refused", err)
	}
}

// The bounded calls cost what the library's cost (the decorator keeps
// the function and overload the cost estimator reads) and give what they
// give on a quantity within bounds.
func TestBoundedQuantityCallsKeepResultAndCost(t *testing.T) {
	env, _, err := environments()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(`quantity(object.spec.cpu).add(quantity("1Ki")).isLessThan(quantity("2")) && isQuantity(object.spec.cpu)`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	plain, err := env.Program(ast, cel.CostTracking(costEstimator))
	if err != nil {
		t.Fatal(err)
	}
	bounded, err := env.Program(ast, cel.CostTracking(costEstimator), cel.CustomDecorator(boundedQuantityCalls))
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []string{"500m", "-3Mi", "1.5Gi", "0.000000001"} {
		vars := map[string]any{ObjectVar: map[string]any{"spec": map[string]any{"cpu": cpu}}}
		want, wantDetails, err := plain.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		got, gotDetails, err := bounded.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || *gotDetails.ActualCost() != *wantDetails.ActualCost() {
			t.Errorf("cpu %s: bounded %v (cost %d), library %v (cost %d)", cpu, got, *gotDetails.ActualCost(), want, *wantDetails.ActualCost())
		}
	}
}
