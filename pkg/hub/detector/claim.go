package detector

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/overrides"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Claims follow Karmada's detector (pkg/detector: compare.go, policy.go,
// preemption.go): the policy that first propagates a template claims it,
// and the claim holds until that policy is deleted or stops selecting the
// template. Another policy takes a claimed template only by preemption.
// Flotilla records the claim on the template's binding (the policy labels
// and the policy's UID), not on the user's template.

// ImplicitPriority is how precisely a policy's selectors pick an object;
// within an explicit priority the more precise policy wins. Karmada's
// names and order.
type ImplicitPriority int

const (
	// PriorityMisMatch: no selector picks the object.
	PriorityMisMatch ImplicitPriority = iota
	// PriorityMatchAll: a selector with neither name nor labelSelector.
	PriorityMatchAll
	// PriorityMatchLabelSelector: a selector's labelSelector matches.
	PriorityMatchLabelSelector
	// PriorityMatchName: a selector names the object.
	PriorityMatchName
)

// SelectorsPriority is the best ImplicitPriority of selectors for obj. A
// namespaced policy (policyNamespace set) picks only objects of its own
// namespace, whatever its selectors say.
func SelectorsPriority(selectors []policyv1alpha1.ResourceSelector, obj *unstructured.Unstructured, policyNamespace string) ImplicitPriority {
	if policyNamespace != "" && obj.GetNamespace() != policyNamespace {
		return PriorityMisMatch
	}
	best := PriorityMisMatch
	for _, s := range selectors {
		if p := selectorPriority(s, obj); p > best {
			best = p
		}
	}
	return best
}

func selectorPriority(s policyv1alpha1.ResourceSelector, obj *unstructured.Unstructured) ImplicitPriority {
	switch {
	case !overrides.SelectorMatches(s, obj):
		return PriorityMisMatch
	case s.Name != "":
		return PriorityMatchName
	case s.LabelSelector != nil:
		return PriorityMatchLabelSelector
	default:
		return PriorityMatchAll
	}
}

// namesObject says whether selectors name obj precisely enough to preempt
// a claim on it. Karmada's preemption fetches each selector's named object
// and nothing else (its policy-preemption proposal: a PropagationPolicy's
// selector must give the name; a ClusterPropagationPolicy's the name and,
// for a namespaced object, the namespace).
func namesObject(selectors []policyv1alpha1.ResourceSelector, obj *unstructured.Unstructured, clusterPolicy bool) bool {
	for _, s := range selectors {
		if s.Name == "" || !overrides.SelectorMatches(s, obj) {
			continue
		}
		if clusterPolicy && obj.GetNamespace() != "" && s.Namespace == "" {
			continue
		}
		return true
	}
	return false
}

// PolicyRef names a PropagationPolicy (Namespace set) or a
// ClusterPropagationPolicy (Namespace empty). UID is empty for a claim
// recorded before Flotilla recorded UIDs: it then matches by name.
type PolicyRef struct {
	Namespace, Name string
	UID             types.UID
}

// Cluster says whether r is a ClusterPropagationPolicy.
func (r PolicyRef) Cluster() bool { return r.Namespace == "" }

func (r PolicyRef) String() string {
	if r.Cluster() {
		return "ClusterPropagationPolicy " + r.Name
	}
	return "PropagationPolicy " + r.Namespace + "/" + r.Name
}

// is says whether a claim on r is a claim of the policy c. A claim read
// from a binding's labels holds a long policy name shortened
// (workobjects.PolicyLabelValue), so that form matches too.
func (r PolicyRef) is(c PolicyRef) bool {
	return r.Namespace == c.Namespace && (r.Name == c.Name || r.Name == workobjects.PolicyLabelValue(c.Name)) && (r.UID == "" || r.UID == c.UID)
}

// Candidate is a policy that selects the object (and is not being
// deleted).
type Candidate struct {
	PolicyRef
	// Priority is the explicit spec.priority (nil is 0).
	Priority   int32
	Implicit   ImplicitPriority
	Preemption policyv1alpha1.PreemptionBehavior
	// NamesObject: a selector names the object (see namesObject).
	NamesObject bool

	// Spec and Object are the policy's, carried for the controller; the
	// decision does not read them.
	Spec   *policyv1alpha1.PropagationSpec
	Object runtime.Object
}

func (c Candidate) describe() string {
	return fmt.Sprintf("%s (priority %d)", c.PolicyRef, c.Priority)
}

// rankBefore is Karmada's order among the policies that select an
// unclaimed template: a PropagationPolicy before a
// ClusterPropagationPolicy, then the higher explicit priority, then the
// higher implicit priority, then the lower name.
func rankBefore(a, b Candidate) bool {
	if a.Cluster() != b.Cluster() {
		return !a.Cluster()
	}
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Implicit != b.Implicit {
		return a.Implicit > b.Implicit
	}
	return a.Name < b.Name
}

// Reasons of the template's PreemptionBlocked condition (and of the
// events on the template and the policy).
const (
	// ReasonClaimedByOtherPolicy: the policy would win the template were it
	// unclaimed, but has preemption Never.
	ReasonClaimedByOtherPolicy = "ClaimedByOtherPolicy"
	// ReasonPreemptionNotAllowed: the policy has preemption Always, but
	// Karmada's rules do not let it take the template from its claimant.
	ReasonPreemptionNotAllowed = "PreemptionNotAllowed"
)

// mayPreempt says whether p may take a template claimed by claimant, and
// if not, the reason and why, in words. Karmada's rules: a
// PropagationPolicy preempts a lower-priority PropagationPolicy or any
// ClusterPropagationPolicy; a ClusterPropagationPolicy preempts only a
// lower-priority ClusterPropagationPolicy; either only for a template one
// of its selectors names.
func mayPreempt(p, claimant Candidate) (ok bool, reason, why string) {
	switch {
	case p.Preemption != policyv1alpha1.PreemptAlways:
		return false, ReasonClaimedByOtherPolicy, "it has preemption Never (the default); with preemption: Always it would take it"
	case p.Cluster() && !claimant.Cluster():
		return false, ReasonPreemptionNotAllowed, "a ClusterPropagationPolicy never preempts a PropagationPolicy"
	case !p.NamesObject:
		what := "the object's name"
		if p.Cluster() {
			what = "the object's name (and namespace, for a namespaced object)"
		}
		return false, ReasonPreemptionNotAllowed, "preemption takes only a template a resourceSelector names, and none of its selectors gives " + what
	case !(!p.Cluster() && claimant.Cluster()) && p.Priority <= claimant.Priority:
		return false, ReasonPreemptionNotAllowed, fmt.Sprintf("preemption needs a higher priority than the claimant's %d, and its priority is %d", claimant.Priority, p.Priority)
	}
	return true, "", ""
}

// ClaimDecision is which policy propagates a template.
type ClaimDecision struct {
	// Winner propagates the template; nil when no policy selects it.
	Winner *Candidate
	// Preempted is the claim Winner took by preemption.
	Preempted *PolicyRef
	// Released is the recorded claim that no longer holds (its policy is
	// gone, being deleted, re-created, or no longer selects the template);
	// Winner, if any, is matched afresh.
	Released *PolicyRef
	// Blocked is the first-ranked policy that would have won the template
	// unclaimed but may not take it from Winner; BlockedReason and
	// BlockedMessage say why.
	Blocked        *Candidate
	BlockedReason  string
	BlockedMessage string
}

// DecideClaim decides which of candidates (the policies that select the
// template) propagates it, given the recorded claim (nil: none). An
// unclaimed template goes to the first by rankBefore. A claimed one stays
// with its claimant unless a policy may preempt it; the first-ranked such
// policy takes it. Evaluated on every sync, so a claimant whose priority
// drops is preempted as Karmada's HandleDeprioritized... handlers do.
func DecideClaim(claim *PolicyRef, candidates []Candidate) ClaimDecision {
	ranked := append([]Candidate(nil), candidates...)
	sort.SliceStable(ranked, func(i, j int) bool { return rankBefore(ranked[i], ranked[j]) })
	var d ClaimDecision
	held := -1
	if claim != nil {
		for i := range ranked {
			if claim.is(ranked[i].PolicyRef) {
				held = i
				break
			}
		}
	}
	if held < 0 {
		if claim != nil {
			released := *claim
			d.Released = &released
		}
		if len(ranked) > 0 {
			d.Winner = &ranked[0]
		}
		return d
	}
	claimant := ranked[held]
	// Whoever may preempt ranks before the claimant (a higher priority, or
	// a PropagationPolicy over a ClusterPropagationPolicy), so only those
	// are looked at.
	for i := 0; i < held; i++ {
		ok, reason, why := mayPreempt(ranked[i], claimant)
		if ok {
			d.Winner = &ranked[i]
			d.Preempted = &claimant.PolicyRef
			d.Blocked, d.BlockedReason, d.BlockedMessage = nil, "", ""
			return d
		}
		if d.Blocked == nil {
			d.Blocked, d.BlockedReason = &ranked[i], reason
			d.BlockedMessage = fmt.Sprintf("%s selects this object and would win it unclaimed, but it is claimed by %s: %s",
				ranked[i].describe(), claimant.describe(), why)
		}
	}
	d.Winner = &ranked[held]
	return d
}

// claimOf reads the claim recorded in a binding's labels.
func claimOf(labels map[string]string) *PolicyRef {
	if name := labels[workobjects.LabelPropagationPolicyName]; name != "" {
		return &PolicyRef{Namespace: labels[workobjects.LabelPropagationPolicyNamespace], Name: name,
			UID: types.UID(labels[workobjects.LabelPropagationPolicyPermanentID])}
	}
	if name := labels[workobjects.LabelClusterPropagationPolicyName]; name != "" {
		return &PolicyRef{Name: name, UID: types.UID(labels[workobjects.LabelClusterPropagationPolicyPermanentID])}
	}
	return nil
}

// objectClaim reads a claim from the embedded object's labels: Karmada
// records its claims on the object (propagationpolicy.karmada.io/name and
// namespace, clusterpropagationpolicy.karmada.io/name), and hub wrap
// --from-karmada rewrites those keys to Flotilla's. It names the policy
// only (Karmada's permanent-id is not a Flotilla UID); a PropagationPolicy
// claim is of the object's own namespace.
func objectClaim(obj *unstructured.Unstructured) *PolicyRef {
	l := obj.GetLabels()
	if name := l[workobjects.LabelPropagationPolicyName]; name != "" {
		if ns := l[workobjects.LabelPropagationPolicyNamespace]; ns != "" && ns != obj.GetNamespace() {
			return nil
		}
		if obj.GetNamespace() == "" {
			return nil
		}
		return &PolicyRef{Namespace: obj.GetNamespace(), Name: name}
	}
	if name := l[workobjects.LabelClusterPropagationPolicyName]; name != "" {
		return &PolicyRef{Name: name}
	}
	return nil
}

// claimLabels are the binding labels that record a claim of r.
func claimLabels(r PolicyRef) map[string]string {
	if r.Cluster() {
		return map[string]string{workobjects.LabelClusterPropagationPolicyName: r.Name,
			workobjects.LabelClusterPropagationPolicyPermanentID: string(r.UID)}
	}
	return map[string]string{workobjects.LabelPropagationPolicyNamespace: r.Namespace,
		workobjects.LabelPropagationPolicyName: r.Name, workobjects.LabelPropagationPolicyPermanentID: string(r.UID)}
}
