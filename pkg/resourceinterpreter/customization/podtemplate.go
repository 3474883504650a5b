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
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/podreferences"
)

// PodTemplateDependenciesFunction is the CEL function
//
//	podTemplateDependencies(template) -> list of {apiVersion, kind, name, optional}
//
// that reads a pod template (a map with a spec, such as a CloneSet's
// object.spec.template) as the built-in interpreter reads a Deployment's:
// the ConfigMaps, Secrets, PersistentVolumeClaims and ServiceAccount of
// the object's namespace it references (podreferences.Of), sorted, each
// once; optional is true when every reference to it is optional (a
// ConfigMap or Secret volume, env or envFrom with optional: true). It is
// what a dependencyInterpretation rule returns, alone or concatenated
// with more. A null template or one without a spec has none; a template
// that is not a map, or whose spec is not a pod spec, is an evaluation
// error.
const PodTemplateDependenciesFunction = "podTemplateDependencies"

// PodTemplateDependenciesEstimatedCost is the function's fixed static cost
// estimate, in CEL cost units: a tenth of StaticCostBudget, so an
// expression may call it a few times but not once per entry of a list
// read from the object (100 × under the size assumption). At evaluation
// it costs one unit per value (map entry, list entry or scalar; a string
// one more per 10 bytes) in the parts of the template it reads: the spec's
// volumes, imagePullSecrets, service account and the containers' env and
// envFrom. A realistic template costs a few hundred; a huge one is
// counted at its size against RuntimeCostLimit.
const PodTemplateDependenciesEstimatedCost = 100_000

// podTemplateDependenciesLibrary declares the function.
func podTemplateDependenciesLibrary() cel.EnvOption {
	return cel.Function(PodTemplateDependenciesFunction,
		cel.Overload("podTemplateDependencies_dyn", []*cel.Type{cel.DynType},
			cel.ListType(cel.MapType(cel.StringType, cel.DynType)),
			cel.UnaryBinding(podTemplateDependencies)))
}

func podTemplateDependencies(arg ref.Val) ref.Val {
	spec, err := readPodSpec(arg)
	if err != nil {
		return celtypes.NewErr("%s: %v", PodTemplateDependenciesFunction, err)
	}
	out := []any{}
	if spec == nil {
		return celtypes.DefaultTypeAdapter.NativeToValue(out)
	}
	refs := podreferences.Of(spec)
	for _, r := range podreferences.Sorted(refs) {
		out = append(out, map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "optional": !refs[r]})
	}
	return celtypes.DefaultTypeAdapter.NativeToValue(out)
}

// templateMap returns the template as a Go map: the object's own map
// when the argument was read from a variable, a conversion otherwise (a
// map literal). nil for null.
func templateMap(arg ref.Val) (map[string]any, error) {
	if arg == nil || arg.Type() == celtypes.NullType {
		return nil, nil
	}
	if m, ok := arg.Value().(map[string]any); ok {
		return m, nil
	}
	if _, ok := arg.(traits.Mapper); ok {
		v, err := toJSON(arg)
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	return nil, fmt.Errorf("the pod template must be a map, got %s", arg.Type().TypeName())
}

// readParts returns the parts of the template's spec the reading uses
// (podreferences.ReadFields, containers reduced to env and envFrom); nil
// when there is no spec.
func readParts(arg ref.Val) (map[string]any, error) {
	tmpl, err := templateMap(arg)
	if err != nil || tmpl == nil {
		return nil, err
	}
	raw, ok := tmpl["spec"]
	if !ok || raw == nil {
		return nil, nil
	}
	spec, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the pod template's spec must be a map, got %s", typeName(raw))
	}
	parts := map[string]any{}
	for _, f := range podreferences.ReadFields {
		v, ok := spec[f]
		if !ok {
			continue
		}
		if list, isList := v.([]any); isList && (f == "initContainers" || f == "containers" || f == "ephemeralContainers") {
			reduced := make([]any, len(list))
			for i, c := range list {
				cm, isMap := c.(map[string]any)
				if !isMap {
					reduced[i] = c // the conversion reports it
					continue
				}
				rc := map[string]any{}
				for _, cf := range podreferences.ContainerReadFields {
					if cv, ok := cm[cf]; ok {
						rc[cf] = cv
					}
				}
				reduced[i] = rc
			}
			v = reduced
		}
		parts[f] = v
	}
	return parts, nil
}

// readPodSpec converts the parts read into a PodSpec; nil when the
// template has no spec.
func readPodSpec(arg ref.Val) (*corev1.PodSpec, error) {
	parts, err := readParts(arg)
	if err != nil || parts == nil {
		return nil, err
	}
	// The parts are the tenant's: their quantities (downward API
	// divisors) are bounded before the conversion parses them.
	if err := quantities.PodSpec.Check(parts, "spec"); err != nil {
		return nil, err
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(parts, &spec); err != nil {
		return nil, fmt.Errorf("not a pod template: %w", err)
	}
	return &spec, nil
}

// podTemplateDependenciesCost is the runtime cost of one call: 1, plus
// the values of the parts read.
func podTemplateDependenciesCost(args []ref.Val) uint64 {
	cost := uint64(1)
	if len(args) != 1 {
		return cost
	}
	parts, err := readParts(args[0])
	if err != nil || parts == nil {
		return cost
	}
	return cost + countValues(parts)
}

// countValues counts v's values as a traversal: one per value, and a
// string one more per 1/StringTraversalCostFactor bytes.
func countValues(v any) uint64 {
	switch t := v.(type) {
	case map[string]any:
		n := uint64(1)
		for _, e := range t {
			n += countValues(e)
		}
		return n
	case []any:
		n := uint64(1)
		for _, e := range t {
			n += countValues(e)
		}
		return n
	case string:
		return 1 + uint64(float64(len(t))*common.StringTraversalCostFactor)
	default:
		return 1
	}
}

// costModel is the apiserver's cost estimator of its library functions
// (library.CostEstimator, with the size assumption), plus the costs of
// Flotilla's functions, statically and at evaluation alike: Compile's
// estimate (the webhook's verdict) and every evaluation's tracking use
// the same model.
type costModel struct {
	lib *library.CostEstimator
}

func (m costModel) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	return m.lib.EstimateSize(element)
}

func (m costModel) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if function == PodTemplateDependenciesFunction {
		return &checker.CallEstimate{
			CostEstimate: checker.CostEstimate{Min: 1, Max: PodTemplateDependenciesEstimatedCost},
			ResultSize:   &checker.SizeEstimate{Min: 0, Max: AssumedMaxSize},
		}
	}
	return m.lib.EstimateCallCost(function, overloadID, target, args)
}

func (m costModel) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if function == PodTemplateDependenciesFunction {
		cost := podTemplateDependenciesCost(args)
		return &cost
	}
	return m.lib.CallCost(function, overloadID, args, result)
}
