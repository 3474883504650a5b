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
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// Expression is one compiled rule.
type Expression struct {
	// Source is the expression as written.
	Source string
	// Field names it in the customization, e.g.
	// spec.customizations.healthInterpretation.expression.
	Field string
	// EstimatedCost is the static estimate's worst case.
	EstimatedCost uint64

	prog     cel.Program
	want     resultKind
	variable string
}

// EvalError is a failed evaluation: the expression's field and why.
type EvalError struct {
	Field string
	Err   error
}

func (e *EvalError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *EvalError) Unwrap() error { return e.Err }

// activation binds the expression's one variable (cheaper than a map)
// and interrupts comprehensions past the deadline.
type activation struct {
	name     string
	value    any
	deadline time.Time
	checks   uint
	expired  bool
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case a.name:
		return a.value, true
	case "#interrupted":
		// Once expired, every comprehension stops at its next
		// iteration: an outer loop must not restart its inner ones.
		a.checks++
		if a.expired || a.checks%InterruptCheckFrequency == 0 && time.Now().After(a.deadline) {
			a.expired = true
			return true, true
		}
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// Eval evaluates e with its variable bound to value (an unstructured
// object's content for `object`, a []any of {clusterName, status} maps for
// `statuses`) and returns the result as JSON-compatible Go values
// (map[string]any, []any, string, int64, float64, bool, nil). The cost
// it used is returned too.
func (e *Expression) Eval(value any) (any, uint64, error) {
	val, cost, err := e.eval(value)
	if err != nil {
		return nil, cost, err
	}
	out, err := toJSON(val)
	if err != nil {
		return nil, cost, &EvalError{e.Field, err}
	}
	return out, cost, nil
}

func (e *Expression) eval(value any) (ref.Val, uint64, error) {
	return e.evalWithin(value, EvalTimeout)
}

func (e *Expression) evalWithin(value any, timeout time.Duration) (ref.Val, uint64, error) {
	val, details, err := e.prog.Eval(&activation{name: e.variable, value: value, deadline: time.Now().Add(timeout)})
	var cost uint64
	if details != nil && details.ActualCost() != nil {
		cost = *details.ActualCost()
	}
	if err != nil {
		return nil, cost, &EvalError{e.Field, err}
	}
	return val, cost, nil
}

// EvalInt evaluates an int rule (replicaResource.replicas): an int, or a
// double without a fraction, from 0 to MaxInt32.
func (e *Expression) EvalInt(obj map[string]any) (int32, error) {
	val, _, err := e.eval(obj)
	if err != nil {
		return 0, err
	}
	var n int64
	switch v := val.(type) {
	case celtypes.Int:
		n = int64(v)
	case celtypes.Uint:
		if uint64(v) > math.MaxInt32 {
			return 0, &EvalError{e.Field, fmt.Errorf("%d is not a replica count (0 to %d)", uint64(v), math.MaxInt32)}
		}
		n = int64(v)
	case celtypes.Double:
		if float64(v) != math.Trunc(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, &EvalError{e.Field, fmt.Errorf("%v is not an integer", float64(v))}
		}
		if math.Abs(float64(v)) > math.MaxInt32 {
			return 0, &EvalError{e.Field, fmt.Errorf("%v is not a replica count (0 to %d)", float64(v), math.MaxInt32)}
		}
		n = int64(v)
	default:
		return 0, &EvalError{e.Field, fmt.Errorf("must evaluate to an int, got %s", val.Type().TypeName())}
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, &EvalError{e.Field, fmt.Errorf("%d is not a replica count (0 to %d)", n, math.MaxInt32)}
	}
	return int32(n), nil
}

// EvalHealth evaluates a health rule: true is Healthy, false Unhealthy,
// or one of the strings "Healthy", "Unhealthy", "Unknown".
func (e *Expression) EvalHealth(obj map[string]any) (workv1alpha1.ResourceHealth, error) {
	val, _, err := e.eval(obj)
	if err != nil {
		return workv1alpha1.ResourceUnknown, err
	}
	switch v := val.(type) {
	case celtypes.Bool:
		if v {
			return workv1alpha1.ResourceHealthy, nil
		}
		return workv1alpha1.ResourceUnhealthy, nil
	case celtypes.String:
		switch h := workv1alpha1.ResourceHealth(v); h {
		case workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy, workv1alpha1.ResourceUnknown:
			return h, nil
		}
		return workv1alpha1.ResourceUnknown, &EvalError{e.Field, fmt.Errorf("%q is not Healthy, Unhealthy or Unknown", string(v))}
	default:
		return workv1alpha1.ResourceUnknown, &EvalError{e.Field, fmt.Errorf("must evaluate to %s, got %s", resultHealth, val.Type().TypeName())}
	}
}

// EvalMap evaluates a map rule (statusReflection,
// replicaResource.podTemplate; statusAggregation: EvalAggregation).
func (e *Expression) EvalMap(value any) (map[string]any, error) {
	out, _, err := e.Eval(value)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, &EvalError{e.Field, fmt.Errorf("must evaluate to a map, got %s", typeName(out))}
	}
	return m, nil
}

// AggregationTimeout is the time limit of a statusAggregation evaluation
// per AssumedMaxSize statuses it folds. EvalTimeout was sized for one
// object on the agent; an aggregation runs on the hub over every cluster's
// status, and a rule's honest work grows with them: the shipped Rollout
// rule takes ~2 ms per 100 statuses (15 ms over 1,000, which EvalTimeout
// cut short from ~600 clusters), so 40 ms per 100 leaves a hub loaded
// five times over room to finish, and stops a rule whose cost tracking
// runs away (EvalTimeout's reason) within 0.4 s over 1,000 clusters.
// RuntimeCostLimit stays the bound of what one evaluation may do.
const AggregationTimeout = 4 * EvalTimeout

// EvalAggregation evaluates statusAggregation over statuses (a list of
// {clusterName, status} maps) into a map, within AggregationTimeout per
// AssumedMaxSize statuses.
func (e *Expression) EvalAggregation(statuses []any) (map[string]any, error) {
	timeout := AggregationTimeout * time.Duration(max(1, (len(statuses)+AssumedMaxSize-1)/AssumedMaxSize))
	val, _, err := e.evalWithin(statuses, timeout)
	if err != nil {
		return nil, err
	}
	out, err := toJSON(val)
	if err != nil {
		return nil, &EvalError{e.Field, err}
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, &EvalError{e.Field, fmt.Errorf("must evaluate to a map, got %s", typeName(out))}
	}
	return m, nil
}

// EvalList evaluates a list rule (dependencyInterpretation).
func (e *Expression) EvalList(obj map[string]any) ([]any, error) {
	out, _, err := e.Eval(obj)
	if err != nil {
		return nil, err
	}
	l, ok := out.([]any)
	if !ok {
		return nil, &EvalError{e.Field, fmt.Errorf("must evaluate to a list, got %s", typeName(out))}
	}
	return l, nil
}

// EvalPodTemplate evaluates replicaResource.podTemplate into a
// PodTemplateSpec.
func (e *Expression) EvalPodTemplate(obj map[string]any) (*corev1.PodTemplateSpec, error) {
	m, err := e.EvalMap(obj)
	if err != nil {
		return nil, err
	}
	// The output is the tenant's object's (or made from it): its
	// quantities are bounded before the conversion parses them.
	if err := quantities.PodTemplateSpec.Check(m, ""); err != nil {
		return nil, &EvalError{e.Field, err}
	}
	var t corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &t); err != nil {
		return nil, &EvalError{e.Field, fmt.Errorf("not a pod template: %w", err)}
	}
	return &t, nil
}

// IsLimit: err is an evaluation stopped by RuntimeCostLimit or
// EvalTimeout.
func IsLimit(err error) bool {
	var ee *EvalError
	if !errors.As(err, &ee) {
		return false
	}
	msg := ee.Err.Error()
	return strings.Contains(msg, "cost limit exceeded") || strings.Contains(msg, "operation interrupted")
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "map"
	case []any:
		return "list"
	case string:
		return "string"
	case int64:
		return "int"
	case float64:
		return "double"
	case bool:
		return "bool"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// maxDepth bounds the nesting of a converted result (JSON itself allows
// any; the apiserver refuses objects nested more deeply than this).
const maxDepth = 100

// toJSON converts a CEL value to JSON-compatible Go values.
func toJSON(v ref.Val) (any, error) { return toJSONDepth(v, 0) }

func toJSONDepth(v ref.Val, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("result nested more than %d levels", maxDepth)
	}
	switch t := v.(type) {
	case celtypes.Null:
		return nil, nil
	case celtypes.Bool:
		return bool(t), nil
	case celtypes.Int:
		return int64(t), nil
	case celtypes.Uint:
		if uint64(t) > math.MaxInt64 {
			return nil, fmt.Errorf("%d does not fit in an int64", uint64(t))
		}
		return int64(t), nil
	case celtypes.Double:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return nil, fmt.Errorf("%v is not a JSON number", float64(t))
		}
		return float64(t), nil
	case celtypes.String:
		return string(t), nil
	case celtypes.Timestamp:
		return t.Time.UTC().Format(time.RFC3339Nano), nil
	case celtypes.Duration:
		return t.Duration.String(), nil
	case *celtypes.Err:
		return nil, t
	}
	switch t := v.(type) {
	case traits.Mapper:
		out := map[string]any{}
		it := t.Iterator()
		for it.HasNext() == celtypes.True {
			k := it.Next()
			ks, ok := k.(celtypes.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %s, not a string", k.Value(), k.Type().TypeName())
			}
			val, err := toJSONDepth(t.Get(k), depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", string(ks), err)
			}
			out[string(ks)] = val
		}
		return out, nil
	case traits.Lister:
		n, ok := t.Size().(celtypes.Int)
		if !ok {
			return nil, fmt.Errorf("list of unknown size")
		}
		out := make([]any, 0, int(n))
		for i := celtypes.Int(0); i < n; i++ {
			val, err := toJSONDepth(t.Get(i), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, val)
		}
		return out, nil
	}
	// Quantities, URLs, IPs and the like: their string form.
	if s, err := v.ConvertToType(celtypes.StringType).(celtypes.String); err {
		return string(s), nil
	}
	return nil, fmt.Errorf("a %s cannot be part of the result", v.Type().TypeName())
}
