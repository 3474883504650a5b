package wrap

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Karmada's fieldOverrider (v1.12) has Flotilla's names and meaning, so it
// converts as it is. What Flotilla's CRD and admission policy refuse, and
// Karmada before v1.18 (whose webhook did not validate it) accepted, is
// reported here rather than left for kubectl apply to refuse the whole
// policy: the offending fieldOverrider is dropped, the rest of the policy
// kept.

// Flotilla's bounds on fieldOverrider lists (pkg/apis/policy/v1alpha1).
const (
	maxFieldOverriders = 64
	maxFieldOverrideOp = 64
)

// identityPaths are the string fields a fieldOverrider may not rewrite.
var identityPaths = map[string]bool{"/apiVersion": true, "/kind": true, "/metadata/name": true,
	"/metadata/namespace": true, "/metadata/generateName": true}

// checkFieldOverriders reports and removes the fieldOverriders of an
// (Cluster)OverridePolicy that Flotilla would refuse; a value given to a
// remove operation (ignored by Karmada before v1.18, refused since) is
// dropped with a note.
func checkFieldOverriders(obj map[string]any, desc, src string, res *Result) []problem {
	rules, ok, _ := unstructured.NestedSlice(obj, "spec", "overrideRules")
	if !ok {
		return nil
	}
	var problems []problem
	changed := false
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		overriders, _ := rule["overriders"].(map[string]any)
		fos, _ := overriders["fieldOverrider"].([]any)
		if len(fos) == 0 {
			continue
		}
		var kept []any
		for j, f := range fos {
			path := fmt.Sprintf("spec.overrideRules[%d].overriders.fieldOverrider[%d]", i, j)
			fo, _ := f.(map[string]any)
			if j >= maxFieldOverriders {
				problems = append(problems, problem{path, fmt.Sprintf("more than %d fieldOverriders in one rule, dropped", maxFieldOverriders)})
				continue
			}
			if msg := invalidFieldOverrider(fo, path, desc, src, res); msg != "" {
				problems = append(problems, problem{path, msg + ", dropped"})
				continue
			}
			kept = append(kept, fo)
		}
		changed = true
		if len(kept) == 0 {
			delete(overriders, "fieldOverrider")
		} else {
			overriders["fieldOverrider"] = kept
		}
	}
	if changed {
		_ = unstructured.SetNestedSlice(obj, rules, "spec", "overrideRules")
	}
	return problems
}

// invalidFieldOverrider says why Flotilla would refuse fo ("" if it would
// not), after dropping the values of remove operations.
func invalidFieldOverrider(fo map[string]any, path, desc, src string, res *Result) string {
	fieldPath, _ := fo["fieldPath"].(string)
	switch {
	case !strings.HasPrefix(fieldPath, "/"):
		return fmt.Sprintf("fieldPath %q is not a JSON pointer to a field (it must start with /)", fieldPath)
	case identityPaths[fieldPath]:
		return fmt.Sprintf("fieldPath %s would change the object's identity", fieldPath)
	}
	jsonOps, _ := fo["json"].([]any)
	yamlOps, _ := fo["yaml"].([]any)
	switch {
	case len(jsonOps) > 0 && len(yamlOps) > 0:
		return "sets both json and yaml (Karmada applies only yaml); set one"
	case len(jsonOps) == 0 && len(yamlOps) == 0:
		return "sets neither json nor yaml"
	}
	format, ops := "json", jsonOps
	if len(yamlOps) > 0 {
		format, ops = "yaml", yamlOps
	}
	if len(ops) > maxFieldOverrideOp {
		return fmt.Sprintf("%d %s operations, more than %d", len(ops), format, maxFieldOverrideOp)
	}
	for k, o := range ops {
		op, _ := o.(map[string]any)
		subPath, _ := op["subPath"].(string)
		operator, _ := op["operator"].(string)
		_, hasValue := op["value"]
		where := fmt.Sprintf("%s[%d]", format, k)
		switch {
		case operator != "add" && operator != "remove" && operator != "replace":
			return fmt.Sprintf("%s: operator %q is not add, remove or replace", where, operator)
		case subPath != "" && !strings.HasPrefix(subPath, "/"):
			return fmt.Sprintf("%s: subPath %q is not a JSON pointer (empty or starting with /)", where, subPath)
		case (operator == "add" || operator == "replace") && (!hasValue || op["value"] == nil):
			return fmt.Sprintf("%s: %s without a value", where, operator)
		case operator == "remove" && hasValue:
			delete(op, "value")
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s.%s: the value of a remove operation dropped (Karmada ignores it, and refuses it since v1.18) (%s)", desc, path, where, src))
		}
	}
	return ""
}
