package wrap

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/jsonpath"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Karmada fields whose spelling or shape differs from Flotilla's although
// the meaning is the same are rewritten before the strict decode (so they
// are converted, not reported); values Flotilla's CRDs would refuse are
// reported after it. Fields Flotilla lacks altogether are left to the
// strict decode, which reports them with a reason from unsupportedReasons.

// purgeModeAliases are the spellings Karmada used until v1.15 (deprecated
// there, removed in v1.19). Flotilla's CRDs accept them too, but the
// output uses the current names so it reads as today's docs do.
var purgeModeAliases = map[string]policyv1alpha1.PurgeMode{
	string(policyv1alpha1.PurgeModeImmediately): policyv1alpha1.PurgeModeDirectly,
	string(policyv1alpha1.PurgeModeGraciously):  policyv1alpha1.PurgeModeGracefully,
}

// prepareKarmadaPolicy rewrites, in a Karmada (Cluster)PropagationPolicy,
// what Flotilla has under another spelling:
//   - purgeMode Immediately/Graciously (Karmada before v1.19) become
//     Directly/Gracefully;
//   - spec.association (deprecated in Karmada in favour of propagateDeps,
//     same meaning) becomes propagateDeps;
//   - decisionConditions.healthyState [Unhealthy] (the application
//     failover proposal's example) is what Flotilla always does, so it
//     goes with a note; any other value is left for the strict decode to
//     report.
func prepareKarmadaPolicy(obj map[string]any, desc, src string, res *Result) {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return
	}
	if assoc, ok := spec["association"].(bool); ok {
		delete(spec, "association")
		switch deps, has := spec["propagateDeps"].(bool); {
		case has && deps != assoc:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: spec.association (deprecated in Karmada) dropped: spec.propagateDeps %v wins (%s)", desc, deps, src))
		case !has && assoc:
			spec["propagateDeps"] = true
			res.Notes = append(res.Notes, fmt.Sprintf("%s: spec.association (deprecated in Karmada) became spec.propagateDeps (%s)", desc, src))
		default:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: spec.association: %v dropped (deprecated in Karmada; spec.propagateDeps is the field) (%s)", desc, assoc, src))
		}
	}
	preemptionNotes(spec, desc, src, res)
	overflowNote(spec, desc, src, res)
	failover, ok := spec["failover"].(map[string]any)
	if !ok {
		return
	}
	for _, which := range []string{"application", "cluster"} {
		behavior, ok := failover[which].(map[string]any)
		if !ok {
			continue
		}
		path := "spec.failover." + which
		if mode, ok := behavior["purgeMode"].(string); ok {
			if to, alias := purgeModeAliases[mode]; alias {
				behavior["purgeMode"] = string(to)
				res.Notes = append(res.Notes, fmt.Sprintf("%s: %s.purgeMode: %s (Karmada before v1.19) written as %s (%s)", desc, path, mode, to, src))
			}
		}
		if _, ok := behavior["statePreservation"].(map[string]any); ok {
			mode, _ := behavior["purgeMode"].(string)
			if policyv1alpha1.NormalizePurgeMode(policyv1alpha1.PurgeMode(mode)) != policyv1alpha1.PurgeModeDirectly {
				// A behaviour change worth saying: the same YAML carries
				// state in Flotilla where Karmada carried none.
				differs(res, desc, path+".statePreservation", src, "Karmada injects the state only with purgeMode Directly "+
					"and one target cluster; Flotilla carries it with any purge mode and to every new cluster")
			}
		}
		if which != "application" {
			continue
		}
		dc, ok := behavior["decisionConditions"].(map[string]any)
		if !ok {
			continue
		}
		if states, has := dc["healthyState"]; has && onlyUnhealthy(states) {
			delete(dc, "healthyState")
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s.decisionConditions.healthyState [Unhealthy] dropped: Flotilla fails over an Unhealthy application, as asked (%s)", desc, path, src))
		}
	}
}

// preemptionNotes say where spec.preemption: Always behaves otherwise
// than a reader of the Karmada setup may expect. Karmada honours it only
// with karmada-controller-manager's feature gate PropagationPolicyPreemption
// (alpha, off by default); Flotilla always does, so a setup that ran
// without the gate will see this policy take templates other policies had
// claimed. And in both, preemption takes only templates a selector names.
func preemptionNotes(spec map[string]any, desc, src string, res *Result) {
	if p, _ := spec["preemption"].(string); p != string(policyv1alpha1.PreemptAlways) {
		return
	}
	differs(res, desc, "spec.preemption", src, "Always takes effect in Flotilla, where Karmada honours it only with "+
		"karmada-controller-manager's feature gate PropagationPolicyPreemption (alpha, off by default): if yours ran without the gate, "+
		"this policy will take the templates it names from the policies that claimed them, and move them (gracefully)")
	selectors, _ := spec["resourceSelectors"].([]any)
	for _, sel := range selectors {
		if m, _ := sel.(map[string]any); m["name"] != nil && m["name"] != "" {
			return
		}
	}
	differs(res, desc, "spec.preemption", src, "Always preempts nothing: no resourceSelector names an object, "+
		"and preemption takes only templates a selector names (as in Karmada)")
}

// onlyUnhealthy says whether a proposal-style healthyState is exactly
// Unhealthy, as a list of one or a string.
func onlyUnhealthy(v any) bool {
	switch s := v.(type) {
	case string:
		return s == "Unhealthy"
	case []any:
		return len(s) == 1 && s[0] == "Unhealthy"
	}
	return false
}

// checkStatePreservation finds the state preservation rules Flotilla's CRD
// or hub would refuse: a jsonPath that is not a kubectl JSONPath template in
// braces (Karmada parses any string, so text without braces is a constant
// there, never a status value) or does not parse, and an aliasLabelName
// that is not a label key. Each is removed and reported; a statePreservation
// left without rules goes too (the CRD wants at least one).
func checkStatePreservation(obj map[string]any) []problem {
	var problems []problem
	for _, which := range []string{"application", "cluster"} {
		path := []string{"spec", "failover", which, "statePreservation"}
		rules, ok, _ := unstructured.NestedSlice(obj, append(path, "rules")...)
		if !ok {
			continue
		}
		var kept []any
		for i, r := range rules {
			rule, _ := r.(map[string]any)
			rulePath := fmt.Sprintf("%s.rules[%d]", strings.Join(path, "."), i)
			if msg := invalidStateRule(rule); msg != "" {
				problems = append(problems, problem{rulePath, msg + ", rule dropped"})
				continue
			}
			kept = append(kept, r)
		}
		// NestedSlice copies, so the kept rules (invalidStateRule may
		// have trimmed a jsonPath) are always written back.
		if len(kept) == 0 {
			unstructured.RemoveNestedField(obj, path...)
			continue
		}
		_ = unstructured.SetNestedSlice(obj, kept, append(path, "rules")...)
	}
	return problems
}

func invalidStateRule(rule map[string]any) string {
	alias, _ := rule["aliasLabelName"].(string)
	path, _ := rule["jsonPath"].(string)
	if errs := validation.IsQualifiedName(alias); len(errs) > 0 {
		return fmt.Sprintf("aliasLabelName %q is not a label key (%s)", alias, strings.Join(errs, "; "))
	}
	trimmed := strings.TrimSpace(path)
	if !strings.HasPrefix(trimmed, "{") || !strings.HasSuffix(trimmed, "}") {
		return fmt.Sprintf("jsonPath %q is not a JSONPath template in braces, e.g. {.jobStatus.checkpointPath} (Karmada would carry the text itself)", path)
	}
	if err := jsonpath.New(alias).Parse(path); err != nil {
		return fmt.Sprintf("jsonPath %q does not parse: %v", path, err)
	}
	if trimmed != path {
		// The CRD wants the braces at the very ends.
		rule["jsonPath"] = trimmed
	}
	return ""
}

// overflowNote says where a ported overflowAffinities behaves otherwise
// than on Karmada.
func overflowNote(spec map[string]any, desc, src string, res *Result) {
	terms, _, _ := unstructured.NestedSlice(spec, "placement", "clusterAffinities")
	for i, t := range terms {
		term, _ := t.(map[string]any)
		if groups, _ := term["overflowAffinities"].([]any); len(groups) > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: spec.placement.clusterAffinities[%d].overflowAffinities: a cluster that has not reported a resourceSummary has no room in Flotilla "+
				"(Karmada without a scheduler-estimator counts it as able to run every replica), and replicas come back to the preferred group by themselves only with spec.failover.failback (%s)", desc, i, src))
			return
		}
	}
}

// unsupportedReasons say why Flotilla lacks a Karmada field, by its path
// with list indices removed, so the report tells a user what to do instead
// of only that it was dropped.
var unsupportedReasons = map[string]string{
	"spec.schedulerName":         "Flotilla has one scheduler, in the hub",
	"spec.activationPreference":  "policy changes apply at once; there is no Lazy activation",
	"spec.secretRef":             "members register with an agent; the hub holds no member credentials",
	"spec.impersonatorSecretRef": "members register with an agent; the hub holds no member credentials",
	"spec.resourceModels":        "the scheduler does not estimate from resource models",
	"spec.failover.application.decisionConditions.healthyState": "Flotilla fails over Unhealthy applications only ([Unhealthy] converts)",
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// explainUnsupported adds the reason for a well-known Karmada field to a
// strict-decode problem.
func explainUnsupported(p problem) problem {
	if reason, ok := unsupportedReasons[listIndex.ReplaceAllString(p.path, "")]; ok && p.message == msgNotSupported {
		p.message = fmt.Sprintf("not supported by Flotilla (%s), dropped", reason)
	}
	return p
}

const msgNotSupported = "not supported by Flotilla, dropped"

// rebalancerNotes flags the workloads of a converted WorkloadRebalancer
// that name no namespace although their kind is namespaced: Karmada reads
// an empty namespace as a cluster-scoped object, so such an entry fails
// there (ReferencedBindingNotFound) and will in Flotilla too. It is kept as
// written, since guessing the namespace would change what it means.
func rebalancerNotes(obj map[string]any, desc, src string, opts Options, res *Result) {
	workloads, _, _ := unstructured.NestedSlice(obj, "spec", "workloads")
	for i, w := range workloads {
		m, _ := w.(map[string]any)
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		ns, _ := m["namespace"].(string)
		if ns != "" || kind == "" {
			continue
		}
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			continue
		}
		gvk := gv.WithKind(kind)
		namespaced, known := BuiltinScope(gvk)
		if opts.Scope != nil {
			if n, k := opts.Scope(gvk); k {
				namespaced, known = n, k
			}
		}
		if known && namespaced {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: spec.workloads[%d]: %s %s names no namespace, which means cluster-scoped; "+
				"it will fail with ReferencedBindingNotFound, as in Karmada (%s)", desc, i, kind, m["name"], src))
		}
	}
}

// unsupportedKindHints say, for Karmada kinds Flotilla has no equivalent
// of, what to use instead where there is something.
var unsupportedKindHints = map[schema.GroupKind]string{
	{Group: "config.karmada.io", Kind: "ResourceInterpreterWebhookConfiguration"}: "no resource interpreter webhooks",
	{Group: "autoscaling.karmada.io", Kind: "FederatedHPA"}:                       "no federated autoscaling",
	{Group: "autoscaling.karmada.io", Kind: "CronFederatedHPA"}:                   "no federated autoscaling",
	{Group: "policy.karmada.io", Kind: "FederatedResourceQuota"}:                  "no federated quotas",
	{Group: "networking.karmada.io", Kind: "MultiClusterService"}:                 "no cross-cluster Service discovery",
}
