package wrap

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// karmadaCustomizationKind is Karmada's ResourceInterpreterCustomization.
var karmadaCustomizationKind = schema.GroupKind{Group: "config.karmada.io", Kind: "ResourceInterpreterCustomization"}

// karmadaCustomization is the part of Karmada's
// config.karmada.io/v1alpha1 ResourceInterpreterCustomization Flotilla
// reads; the strict decode reports anything else.
type karmadaCustomization struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Target struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"target"`
		Customizations map[string]*struct {
			LuaScript string `json:"luaScript"`
		} `json:"customizations"`
	} `json:"spec"`
}

// karmadaOperations are Karmada's operations in the order they are
// reported.
var karmadaOperations = []string{"retention", "replicaResource", "replicaRevision", "statusReflection",
	"statusAggregation", "healthInterpretation", "dependencyInterpretation", "componentResource"}

// convertKarmadaCustomization turns a Karmada ResourceInterpreterCustomization
// into Flotilla's: the target as it is, and each Lua script whose syntax
// tree has a CEL (or JSON pointer) equivalent; every other script is
// reported, naming the operation. Nothing is emitted when no operation
// converts.
func convertKarmadaCustomization(s sourced, res *Result) (*unstructured.Unstructured, error) {
	obj := s.obj.DeepCopy()
	Strip(obj)
	desc := describe("ResourceInterpreterCustomization", "", obj.GetName())
	if ns := obj.GetNamespace(); ns != "" {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: cluster-scoped, metadata.namespace %q removed (%s)", desc, ns, s.src))
		unstructured.RemoveNestedField(obj.Object, "metadata", "namespace")
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.src, desc, err)
	}
	var in karmadaCustomization
	strictErrs, err := sigsjson.UnmarshalStrict(data, &in)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: cannot convert: %w", s.src, desc, err)
	}
	report := func(path, msg string) {
		res.Unsupported = append(res.Unsupported, Finding{Object: desc, Path: path, Message: msg, Source: s.src})
	}
	for _, se := range strictErrs {
		var fe sigsjson.FieldError
		if errors.As(se, &fe) {
			report(fe.FieldPath(), "not a field of Karmada's ResourceInterpreterCustomization (scripts live under spec.customizations), dropped")
		} else {
			report("", se.Error())
		}
	}
	if in.Spec.Target.APIVersion == "" || in.Spec.Target.Kind == "" {
		report("spec.target", "apiVersion and kind are required; not emitted")
		return nil, nil
	}

	var rules configv1alpha1.CustomizationRules
	converted := 0
	for _, op := range karmadaOperations {
		c, ok := in.Spec.Customizations[op]
		if !ok || c == nil {
			continue
		}
		path := "spec.customizations." + op + ".luaScript"
		notes, err := convertOperation(op, c.LuaScript, &rules)
		if err == nil {
			err = compiles(in.Spec.Target.APIVersion, in.Spec.Target.Kind, op, &rules)
		}
		if err != nil {
			report(path, fmt.Sprintf("Lua script not converted (%s); %s", reason(err), operationHint(op)))
			continue
		}
		if op != "retention" || rules.Retention != nil { // retaining nothing is a note, not a rule
			converted++
		}
		for _, n := range notes {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s: %s (%s)", desc, op, n, s.src))
		}
	}
	for op := range in.Spec.Customizations {
		if _, known := luaEntry[op]; !known {
			report("spec.customizations."+op, "not an operation Flotilla knows, dropped")
		}
	}
	if converted == 0 {
		report("", "no operation converted, not emitted")
		return nil, nil
	}

	out := &configv1alpha1.ResourceInterpreterCustomization{
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: in.Spec.Target.APIVersion, Kind: in.Spec.Target.Kind},
			Customizations: rules,
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.src, desc, err)
	}
	delete(u, "status")
	u["metadata"] = obj.Object["metadata"]
	result := &unstructured.Unstructured{Object: u}
	result.SetGroupVersionKind(configv1alpha1.SchemeGroupVersion.WithKind("ResourceInterpreterCustomization"))
	rewriteKarmadaKeys(result.Object, desc, res)
	return result, nil
}

// convertOperation converts one operation's script into rules.
func convertOperation(op, script string, rules *configv1alpha1.CustomizationRules) ([]string, error) {
	switch op {
	case "healthInterpretation":
		expr, notes, err := convertHealthLua(script)
		if err != nil {
			return nil, err
		}
		rules.HealthInterpretation = &configv1alpha1.HealthInterpretation{Expression: expr}
		return notes, checkLength(expr)
	case "replicaResource":
		replicas, tmpl, notes, err := convertReplicaResourceLua(script)
		if err != nil {
			return nil, err
		}
		rules.ReplicaResource = &configv1alpha1.ReplicaResourceRequirement{Replicas: replicas, PodTemplate: tmpl}
		if err := checkLength(replicas); err != nil {
			return nil, err
		}
		return notes, checkLength(tmpl)
	case "replicaRevision":
		p, err := convertReviseReplicaLua(script)
		if err != nil {
			return nil, err
		}
		rules.ReplicaRevision = &configv1alpha1.ReplicaRevision{ReplicasPath: p}
		return nil, nil
	case "statusReflection":
		expr, notes, err := convertReflectStatusLua(script)
		if err != nil {
			return nil, err
		}
		rules.StatusReflection = &configv1alpha1.StatusReflection{Expression: expr}
		return notes, checkLength(expr)
	case "dependencyInterpretation":
		expr, notes, err := convertDependenciesLua(script)
		if err != nil {
			return nil, err
		}
		rules.DependencyInterpretation = &configv1alpha1.DependencyInterpretation{Expression: expr}
		return notes, checkLength(expr)
	case "retention":
		paths, notes, err := convertRetainLua(script)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			rules.Retention = &configv1alpha1.LocalValueRetention{FieldPaths: paths}
		} else {
			notes = append(notes, "retains nothing Flotilla would overwrite; no rule needed")
		}
		return notes, nil
	case "statusAggregation":
		// Karmada's aggregation scripts fold a list in a loop; the
		// evaluator converts no loops, so say so without parsing.
		if _, _, err := luaFunction(script, "AggregateStatus"); err != nil {
			return nil, err
		}
		return nil, notConvertible("folds the clusters' statuses in Lua")
	case "componentResource":
		return nil, errors.New("components have no equivalent: Flotilla schedules one pod template per workload")
	}
	return nil, notConvertible("unknown operation")
}

// compiles checks the rule just converted for op as the webhook will
// (customization.Validate: it compiles, within the cost budget); a rule
// that does not is removed from rules and reported.
func compiles(apiVersion, kind, op string, rules *configv1alpha1.CustomizationRules) error {
	if op == "retention" && rules.Retention == nil {
		return nil // nothing to retain, noted
	}
	one := configv1alpha1.CustomizationRules{}
	switch op {
	case "healthInterpretation":
		one.HealthInterpretation, rules.HealthInterpretation = rules.HealthInterpretation, nil
	case "replicaResource":
		one.ReplicaResource, rules.ReplicaResource = rules.ReplicaResource, nil
	case "replicaRevision":
		one.ReplicaRevision, rules.ReplicaRevision = rules.ReplicaRevision, nil
	case "statusReflection":
		one.StatusReflection, rules.StatusReflection = rules.StatusReflection, nil
	case "dependencyInterpretation":
		one.DependencyInterpretation, rules.DependencyInterpretation = rules.DependencyInterpretation, nil
	case "retention":
		one.Retention, rules.Retention = rules.Retention, nil
	default:
		return nil
	}
	ric := &configv1alpha1.ResourceInterpreterCustomization{Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
		Target: configv1alpha1.CustomizationTarget{APIVersion: apiVersion, Kind: kind}, Customizations: one}}
	if errs := customization.Validate(ric); len(errs) > 0 {
		return fmt.Errorf("its CEL translation is refused: %s", errs[0].Detail)
	}
	switch op {
	case "healthInterpretation":
		rules.HealthInterpretation = one.HealthInterpretation
	case "replicaResource":
		rules.ReplicaResource = one.ReplicaResource
	case "replicaRevision":
		rules.ReplicaRevision = one.ReplicaRevision
	case "statusReflection":
		rules.StatusReflection = one.StatusReflection
	case "dependencyInterpretation":
		rules.DependencyInterpretation = one.DependencyInterpretation
	case "retention":
		rules.Retention = one.Retention
	}
	return nil
}

// maxExpressionLength is the API's limit on one expression.
const maxExpressionLength = 4096

func checkLength(expr string) error {
	if len(expr) > maxExpressionLength {
		return notConvertible("the CEL translation is %d characters, more than %d", len(expr), maxExpressionLength)
	}
	return nil
}

func reason(err error) string {
	msg := err.Error()
	prefix := errNotConvertible.Error() + ": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return "it " + msg[len(prefix):]
	}
	return msg
}

// operationHint says which Flotilla field to write by hand.
func operationHint(op string) string {
	switch op {
	case "replicaResource":
		return "write spec.customizations.replicaResource.replicas and podTemplate (CEL)"
	case "replicaRevision":
		return "write spec.customizations.replicaRevision.replicasPath (a JSON pointer)"
	case "retention":
		return "write spec.customizations.retention.fieldPaths (JSON pointers)"
	case "componentResource":
		return "no Flotilla equivalent"
	}
	return "write spec.customizations." + op + ".expression (CEL)"
}
