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

// Package customization compiles the CEL rules of a
// ResourceInterpreterCustomization and evaluates them: Kubernetes' own CEL
// environment (the apiserver's base environment and libraries), every
// expression compiled once, refused when its static cost estimate exceeds
// the budget, and every evaluation bounded by a runtime cost limit. An
// evaluation that fails (a missing field, a wrong result type, the cost
// limit) is an error, never a panic; callers turn it into Unknown health or
// fall back to the built-in interpreter.
//
// The rules, their variables and the budget are described for users in
// docs/interpreter.md.
package customization

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

// Rules are the compiled rules of one customization. A nil field means the
// customization has no rule for that operation.
type Rules struct {
	// Name is the customization's name, for logs and errors.
	Name string
	// Target is the kind the rules apply to.
	Target schema.GroupVersionKind

	Health            *Expression
	Replicas          *Expression
	PodTemplate       *Expression
	StatusReflection  *Expression
	StatusAggregation *Expression
	Dependencies      *Expression
	// ReplicasPath is replicaRevision.replicasPath, parsed; nil: no rule.
	ReplicasPath Pointer
	// Retention is retention.fieldPaths, parsed.
	Retention []Pointer
}

var (
	customizationsPath = field.NewPath("spec", "customizations")
	targetPath         = field.NewPath("spec", "target")
)

// resultKind is what an operation's expression must evaluate to.
type resultKind int

const (
	resultInt resultKind = iota
	resultHealth
	resultMap
	resultList
)

func (k resultKind) String() string {
	switch k {
	case resultInt:
		return "an int"
	case resultHealth:
		return `a bool or one of the strings "Healthy", "Unhealthy", "Unknown"`
	case resultMap:
		return "a map"
	default:
		return "a list"
	}
}

// accepts: the static type could be the wanted result. dyn always
// could (the variables are dyn); the value is checked at evaluation.
func (k resultKind) accepts(t *celtypes.Type) bool {
	switch t.Kind() {
	case celtypes.DynKind, celtypes.AnyKind:
		return true
	}
	switch k {
	case resultInt:
		return t.Kind() == celtypes.IntKind || t.Kind() == celtypes.UintKind
	case resultHealth:
		return t.Kind() == celtypes.BoolKind || t.Kind() == celtypes.StringKind
	case resultMap:
		return t.Kind() == celtypes.MapKind
	default:
		return t.Kind() == celtypes.ListKind
	}
}

// Compile compiles every rule of ric. Errors name the field of the
// expression (spec.customizations.healthInterpretation.expression, ...):
// it does not parse or type-check, cannot produce the operation's result,
// or its estimated cost exceeds StaticCostBudget; or the target or a path
// is invalid (targetErrors). Rules is nil when there are errors.
//
// Compile is the one judgement of a customization: the hub and the agents
// use its Rules, the webhook refuses what it refuses (Validate), and the
// Compiled condition says what it returned.
func Compile(ric *configv1alpha1.ResourceInterpreterCustomization) (*Rules, field.ErrorList) {
	var errs field.ErrorList
	rules := &Rules{Name: ric.Name}

	gv, err := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
	switch {
	case ric.Spec.Target.APIVersion == "":
		errs = append(errs, field.Required(targetPath.Child("apiVersion"), ""))
	case err != nil || gv.Version == "":
		errs = append(errs, field.Invalid(targetPath.Child("apiVersion"), ric.Spec.Target.APIVersion, "must be group/version or version"))
	}
	if ric.Spec.Target.Kind == "" {
		errs = append(errs, field.Required(targetPath.Child("kind"), ""))
	}
	rules.Target = gv.WithKind(ric.Spec.Target.Kind)

	c := ric.Spec.Customizations
	compile := func(src string, path *field.Path, want resultKind, vars string) *Expression {
		e, err := compileExpression(src, path, want, vars)
		if err != nil {
			errs = append(errs, err)
		}
		return e
	}
	if r := c.HealthInterpretation; r != nil {
		rules.Health = compile(r.Expression, customizationsPath.Child("healthInterpretation", "expression"), resultHealth, ObjectVar)
	}
	if r := c.ReplicaResource; r != nil {
		rules.Replicas = compile(r.Replicas, customizationsPath.Child("replicaResource", "replicas"), resultInt, ObjectVar)
		if r.PodTemplate != "" {
			rules.PodTemplate = compile(r.PodTemplate, customizationsPath.Child("replicaResource", "podTemplate"), resultMap, ObjectVar)
		}
	}
	if r := c.StatusReflection; r != nil {
		rules.StatusReflection = compile(r.Expression, customizationsPath.Child("statusReflection", "expression"), resultMap, ObjectVar)
	}
	if r := c.StatusAggregation; r != nil {
		rules.StatusAggregation = compile(r.Expression, customizationsPath.Child("statusAggregation", "expression"), resultMap, StatusesVar)
	}
	if r := c.DependencyInterpretation; r != nil {
		rules.Dependencies = compile(r.Expression, customizationsPath.Child("dependencyInterpretation", "expression"), resultList, ObjectVar)
	}
	if r := c.ReplicaRevision; r != nil {
		p := customizationsPath.Child("replicaRevision", "replicasPath")
		ptr, err := ParsePointer(r.ReplicasPath)
		if err != nil {
			errs = append(errs, field.Invalid(p, r.ReplicasPath, err.Error()))
		} else if msg := notWritable(ptr); msg != "" {
			errs = append(errs, field.Invalid(p, r.ReplicasPath, msg))
		}
		rules.ReplicasPath = ptr
	}
	if r := c.Retention; r != nil {
		p := customizationsPath.Child("retention", "fieldPaths")
		if len(r.FieldPaths) == 0 {
			errs = append(errs, field.Required(p, "name at least one field"))
		}
		for i, s := range r.FieldPaths {
			ptr, err := ParsePointer(s)
			if err != nil {
				errs = append(errs, field.Invalid(p.Index(i), s, err.Error()))
				continue
			}
			if msg := notWritable(ptr); msg != "" {
				errs = append(errs, field.Invalid(p.Index(i), s, msg))
				continue
			}
			rules.Retention = append(rules.Retention, ptr)
		}
	}
	errs = append(errs, targetErrors(ric)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return rules, nil
}

// Validate returns the errors of Compile: what the validating webhook
// refuses, exactly what the hub and the agents do not use.
func Validate(ric *configv1alpha1.ResourceInterpreterCustomization) field.ErrorList {
	_, errs := Compile(ric)
	return errs
}

// targetErrors are the semantic checks on ric as a whole. A customization
// that reached the store without the webhook (installed before it, or
// while it was down) and fails them is not used either: Flotilla's own
// kinds keep Flotilla's interpretation.
func targetErrors(ric *configv1alpha1.ResourceInterpreterCustomization) field.ErrorList {
	var errs field.ErrorList
	gv, err := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
	if err == nil && (gv.Group == "flotilla.io" || strings.HasSuffix(gv.Group, ".flotilla.io")) {
		errs = append(errs, field.Invalid(targetPath.Child("apiVersion"), ric.Spec.Target.APIVersion,
			"Flotilla's own kinds cannot be customized"))
	}
	c := ric.Spec.Customizations
	if c.Retention == nil && c.ReplicaResource == nil && c.ReplicaRevision == nil && c.StatusReflection == nil &&
		c.StatusAggregation == nil && c.HealthInterpretation == nil && c.DependencyInterpretation == nil {
		errs = append(errs, field.Required(customizationsPath, "at least one operation"))
	}
	return errs
}

// notWritable: a field that identifies the object, or its status, cannot
// be written by a rule or retained from the member.
func notWritable(p Pointer) string {
	if len(p) == 0 {
		return "must name a field, not the whole object"
	}
	switch p[0] {
	case "apiVersion", "kind":
		return "names the object's type"
	case "status":
		return "status is the member's own and never applied"
	case "metadata":
		if len(p) == 1 {
			return "must name a field inside metadata"
		}
		switch p[1] {
		case "name", "namespace", "uid", "resourceVersion", "generation", "managedFields", "ownerReferences",
			"creationTimestamp", "deletionTimestamp", "finalizers":
			return "metadata." + p[1] + " is Flotilla's or the apiserver's"
		}
	}
	return ""
}

// compileExpression compiles src in the environment declaring vars.
func compileExpression(src string, path *field.Path, want resultKind, vars string) (*Expression, *field.Error) {
	if strings.TrimSpace(src) == "" {
		return nil, field.Required(path, "an expression")
	}
	objectEnv, statusesEnv, err := environments()
	if err != nil {
		return nil, field.InternalError(path, err)
	}
	env := objectEnv
	if vars == StatusesVar {
		env = statusesEnv
	}
	ast, issues := env.Compile(src)
	if issues != nil && issues.Err() != nil {
		msg := "compilation failed: " + issues.String()
		if strings.Contains(msg, "expected type") {
			// Kubernetes' CEL refuses mixed list and map literals.
			msg += "\n(list and map literals must be homogeneous, as everywhere in Kubernetes' CEL: wrap mixed values in dyn(), " +
				`e.g. {"kind": dyn("ConfigMap"), "name": object.spec.configName})`
		}
		return nil, field.Invalid(path, src, msg)
	}
	if !want.accepts(ast.OutputType()) {
		return nil, field.Invalid(path, src, fmt.Sprintf("must evaluate to %s, not %s", want, ast.OutputType()))
	}
	est, err := env.EstimateCost(ast, costEstimator)
	if err != nil {
		return nil, field.Invalid(path, src, "cost estimation failed: "+err.Error())
	}
	if est.Max > StaticCostBudget {
		return nil, field.Forbidden(path, fmt.Sprintf(
			"estimated cost %d exceeds the budget of %d (assuming lists, maps and strings of at most %d entries); "+
				"avoid nested loops over the object's lists", est.Max, StaticCostBudget, AssumedMaxSize))
	}
	prog, err := env.Program(ast,
		cel.CostLimit(RuntimeCostLimit),
		cel.CostTracking(costEstimator),
		cel.InterruptCheckFrequency(InterruptCheckFrequency),
		cel.CustomDecorator(boundedQuantityCalls),
	)
	if err != nil {
		return nil, field.Invalid(path, src, "program instantiation failed: "+err.Error())
	}
	return &Expression{
		Source:        src,
		Field:         path.String(),
		EstimatedCost: est.Max,
		prog:          prog,
		want:          want,
		variable:      vars,
	}, nil
}
