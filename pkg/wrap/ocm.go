package wrap

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Open Cluster Management (open-cluster-management.io/api): a
// ManifestWorkReplicaSet (work.open-cluster-management.io/v1alpha1) holds
// manifests and names Placements (cluster.open-cluster-management.io/v1beta1)
// with a rolloutStrategy each; OCM writes a ManifestWork per selected
// cluster. Flotilla's equivalent is a template per manifest and one policy
// selecting them, whose placement is the Placement's label selector and
// whose rolloutStrategy keeps OCM's names. The semantics compared are those
// of OCM's rollout handler (open-cluster-management.io/sdk-go,
// pkg/apis/cluster/v1alpha1/rollout.go).

var (
	ocmManifestWorkReplicaSet = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1alpha1", Kind: "ManifestWorkReplicaSet"}
	ocmPlacementKind          = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "Placement"}
)

// ocmKindHints say what to use instead of OCM kinds hub wrap does not
// convert.
var ocmKindHints = map[string]string{
	"ManifestWork":             "a ManifestWork targets the one cluster whose namespace holds it; wrap its manifests and write a PropagationPolicy naming that cluster",
	"ManagedCluster":           "register the member with an agent, see docs/agent.md",
	"ManagedClusterSet":        "Flotilla has no cluster sets; label the Clusters and select them by label",
	"ManagedClusterSetBinding": "Flotilla has no cluster sets; label the Clusters and select them by label",
	"PlacementDecision":        "written by OCM's placement controller; the Flotilla hub schedules itself",
	"AddOnPlacementScore":      "Flotilla's scheduler does not score clusters by add-on scores",
}

// The mirror of the OCM fields hub wrap reads.
type (
	ocmMWRS struct {
		peerMeta
		Spec ocmMWRSSpec `json:"spec"`
	}
	ocmMWRSSpec struct {
		ManifestWorkTemplate  ocmWorkSpec       `json:"manifestWorkTemplate"`
		PlacementRefs         []ocmPlacementRef `json:"placementRefs"`
		CascadeDeletionPolicy string            `json:"cascadeDeletionPolicy"`
	}
	ocmWorkSpec struct {
		Workload struct {
			Manifests json.RawMessage `json:"manifests"`
		} `json:"workload"`
		DeleteOption    *ocmDeleteOption `json:"deleteOption"`
		ManifestConfigs json.RawMessage  `json:"manifestConfigs"`
		Executor        json.RawMessage  `json:"executor"`
	}
	ocmDeleteOption struct {
		PropagationPolicy       string          `json:"propagationPolicy"`
		SelectivelyOrphans      json.RawMessage `json:"selectivelyOrphans"`
		TTLSecondsAfterFinished *int64          `json:"ttlSecondsAfterFinished"`
	}
	ocmPlacementRef struct {
		Name            string             `json:"name"`
		RolloutStrategy ocmRolloutStrategy `json:"rolloutStrategy"`
	}
	ocmRolloutStrategy struct {
		Type                string                  `json:"type"`
		All                 *ocmRolloutConfig       `json:"all"`
		Progressive         *ocmProgressive         `json:"progressive"`
		ProgressivePerGroup *ocmProgressivePerGroup `json:"progressivePerGroup"`
	}
	ocmRolloutConfig struct {
		MinSuccessTime   metav1.Duration    `json:"minSuccessTime"`
		ProgressDeadline string             `json:"progressDeadline"`
		MaxFailures      intstr.IntOrString `json:"maxFailures"`
	}
	ocmMandatoryGroup struct {
		GroupName  string `json:"groupName"`
		GroupIndex *int32 `json:"groupIndex"`
	}
	ocmProgressive struct {
		ocmRolloutConfig
		MandatoryDecisionGroups []ocmMandatoryGroup `json:"mandatoryDecisionGroups"`
		MaxConcurrency          intstr.IntOrString  `json:"maxConcurrency"`
	}
	ocmProgressivePerGroup struct {
		ocmRolloutConfig
		MandatoryDecisionGroups []ocmMandatoryGroup `json:"mandatoryDecisionGroups"`
	}

	ocmPlacement struct {
		peerMeta
		Spec ocmPlacementSpec `json:"spec"`
	}
	ocmPlacementSpec struct {
		ClusterSets       []string       `json:"clusterSets"`
		NumberOfClusters  *int32         `json:"numberOfClusters"`
		Predicates        []ocmPredicate `json:"predicates"`
		PrioritizerPolicy struct {
			Mode           string          `json:"mode"`
			Configurations json.RawMessage `json:"configurations"`
		} `json:"prioritizerPolicy"`
		SpreadPolicy struct {
			SpreadConstraints json.RawMessage `json:"spreadConstraints"`
		} `json:"spreadPolicy"`
		Tolerations      json.RawMessage `json:"tolerations"`
		DecisionStrategy struct {
			GroupStrategy struct {
				DecisionGroups           []ocmDecisionGroup  `json:"decisionGroups"`
				ClustersPerDecisionGroup *intstr.IntOrString `json:"clustersPerDecisionGroup"`
			} `json:"groupStrategy"`
		} `json:"decisionStrategy"`
		SortBy         string `json:"sortBy"`
		ScoreRateLimit string `json:"scoreRateLimit"`
	}
	ocmPredicate struct {
		RequiredClusterSelector struct {
			LabelSelector *metav1.LabelSelector `json:"labelSelector"`
			ClaimSelector json.RawMessage       `json:"claimSelector"`
			CelSelector   json.RawMessage       `json:"celSelector"`
		} `json:"requiredClusterSelector"`
	}
	ocmDecisionGroup struct {
		GroupName            string `json:"groupName"`
		GroupClusterSelector struct {
			LabelSelector *metav1.LabelSelector `json:"labelSelector"`
			ClaimSelector json.RawMessage       `json:"claimSelector"`
		} `json:"groupClusterSelector"`
	}
)

// mwrsManifestsPath is where a ManifestWorkReplicaSet holds its manifests.
var mwrsManifestsPath = []string{"spec", "manifestWorkTemplate", "workload", "manifests"}

// mwrsManifests reads a ManifestWorkReplicaSet's manifests as objects of
// the input (Lists flattened), each checked like a document.
func mwrsManifests(s sourced) ([]sourced, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(s.obj.Object, mwrsManifestsPath...)
	if !found || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		what := jsonKind(raw)
		if _, isMap := raw.(map[string]any); isMap {
			what = "mapping"
		}
		return nil, fmt.Errorf("%s: ManifestWorkReplicaSet %s: %s is a %s, not a list", s.src, s.obj.GetName(),
			strings.Join(mwrsManifestsPath, "."), what)
	}
	var out []sourced
	for i, item := range list {
		src := fmt.Sprintf("%s, %s[%d]", s.src, strings.Join(mwrsManifestsPath, "."), i)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a Kubernetes object (a %s, not a mapping)", src, jsonKind(item))
		}
		objs, err := flatten(deepCopyMap(m), src)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// ocmIndex holds the input's Placements by namespace and name.
type ocmIndex struct {
	placements map[string]*ocmPlacementInfo
	shadowed   map[*peerObject]bool // a Placement of the same namespace and name came first
}

// ocmPlacementInfo is a Placement, converted once however many
// ManifestWorkReplicaSets name it.
type ocmPlacementInfo struct {
	p         *peerObject
	c         *peerConv
	namespace string
	done      bool
	err       error
	spec      ocmPlacementSpec
	affinity  *policyv1alpha1.ClusterAffinity // nil: every cluster
	groups    []ocmGroup                      // the decision groups that convert, in order
	groupPath string                          // path of the decision groups in the Placement
}

// ocmGroup is a decision group: its OCM name and index, and Flotilla's
// group.
type ocmGroup struct {
	name  string
	index int
	group policyv1alpha1.RolloutGroup
}

func newOCMIndex(peers []*peerObject, opts Options) *ocmIndex {
	idx := &ocmIndex{placements: map[string]*ocmPlacementInfo{}, shadowed: map[*peerObject]bool{}}
	for _, p := range peers {
		if p.obj.GroupVersionKind() != ocmPlacementKind {
			continue
		}
		ns := p.obj.GetNamespace()
		if ns == "" {
			ns = opts.Namespace
		}
		key := ns + "/" + p.obj.GetName()
		if _, dup := idx.placements[key]; dup {
			idx.shadowed[p] = true // the first one is used
			continue
		}
		idx.placements[key] = &ocmPlacementInfo{p: p, namespace: ns}
	}
	return idx
}

// placement returns the Placement namespace/name of the input, converted,
// or nil.
func (idx *ocmIndex) placement(namespace, name string, res *Result) (*ocmPlacementInfo, error) {
	pl := idx.placements[namespace+"/"+name]
	if pl == nil {
		return nil, nil
	}
	if !pl.done {
		pl.done = true
		pl.err = pl.convert(res)
	}
	pl.p.used = true
	return pl, pl.err
}

// convert reads the Placement: its first predicate's label selector
// becomes the policy's cluster affinity, its decision groups Flotilla's;
// what Flotilla's placement cannot hold is reported.
func (pl *ocmPlacementInfo) convert(res *Result) error {
	obj := pl.p.obj.DeepCopy()
	Strip(obj)
	pl.c = &peerConv{res: res, desc: describe("Placement", pl.namespace, obj.GetName()), src: pl.p.src, peer: "OCM"}
	c := pl.c
	v, err := decodePeer(obj.Object, func() any { return &ocmPlacement{} }, c)
	if err != nil {
		return err
	}
	pl.spec = v.(*ocmPlacement).Spec
	spec := &pl.spec
	if len(spec.ClusterSets) > 0 {
		c.unsupported("spec.clusterSets", "not converted: Flotilla has no ManagedClusterSets, the policy may select any cluster its affinity matches "+
			"(label those clusters and select them by label)")
	} else {
		c.note("spec.clusterSets", "OCM selects only clusters of the ManagedClusterSets bound to namespace %s (ManagedClusterSetBinding); "+
			"Flotilla has no cluster sets: the policy may select any cluster its affinity matches", pl.namespace)
	}
	for i, pred := range spec.Predicates {
		path := fmt.Sprintf("spec.predicates[%d].requiredClusterSelector", i)
		sel := pred.RequiredClusterSelector
		if i > 0 {
			c.unsupported(fmt.Sprintf("spec.predicates[%d]", i), "not converted: OCM ORs the predicates, Flotilla's cluster affinity holds one "+
				"label selector (predicates[0]'s); write a policy per predicate for other templates")
			continue
		}
		if rawSet(sel.ClaimSelector) {
			c.unsupported(path+".claimSelector", "not converted: Flotilla selects clusters by label, not by ClusterClaim")
		}
		if rawSet(sel.CelSelector) {
			c.unsupported(path+".celSelector", "not converted: Flotilla's cluster affinity has no CEL selector")
		}
		if emptySelector(sel.LabelSelector) {
			continue
		}
		if why := checkSelector(sel.LabelSelector); why != "" {
			c.unsupported(path+".labelSelector", "%s, not converted", why)
			continue
		}
		pl.affinity = &policyv1alpha1.ClusterAffinity{LabelSelector: sel.LabelSelector}
		c.note(path+".labelSelector", "when no cluster matches any more, Flotilla keeps the workload where it runs and says Scheduled=False; "+
			"OCM deletes its ManifestWorks from those clusters")
		notePeerLabelKeys(c, path+".labelSelector", sel.LabelSelector, IsOCMGroup)
	}
	if spec.NumberOfClusters != nil {
		c.unsupported("spec.numberOfClusters", "not converted: the policy selects every matching cluster (a spreadConstraint "+
			"{spreadByField: cluster, maxGroups: N} would limit it to N, chosen by Flotilla's scheduler)")
	}
	if rawSet(spec.PrioritizerPolicy.Configurations) {
		c.unsupported("spec.prioritizerPolicy.configurations", "not converted: Flotilla's scheduler does not score clusters by OCM's prioritizers")
	}
	if rawSet(spec.SpreadPolicy.SpreadConstraints) {
		c.unsupported("spec.spreadPolicy.spreadConstraints", "not converted: OCM's skew-based spread has no Flotilla equivalent "+
			"(Flotilla's spreadConstraints choose groups by minGroups/maxGroups)")
	}
	if rawSet(spec.Tolerations) {
		c.unsupported("spec.tolerations", "not converted: they tolerate OCM's ManagedCluster taints; write spec.placement.clusterTolerations "+
			"for the taints of Flotilla's Clusters")
	}
	switch spec.SortBy {
	case "", "ClusterName":
	default:
		c.unsupported("spec.sortBy", "%s not converted: Flotilla orders a rollout's clusters by name", spec.SortBy)
	}
	if spec.ScoreRateLimit != "" && spec.ScoreRateLimit != "1m" {
		c.note("spec.scoreRateLimit", "dropped: Flotilla keeps no OCM scores to limit")
	}

	pl.groupPath = "spec.decisionStrategy.groupStrategy.decisionGroups"
	seen := map[string]bool{}
	for i, dg := range spec.DecisionStrategy.GroupStrategy.DecisionGroups {
		path := fmt.Sprintf("%s[%d]", pl.groupPath, i)
		name, renamed := groupName(dg.GroupName)
		switch {
		case name == "":
			c.unsupported(path+".groupName", "%q is not a Flotilla group name (a DNS label other than %q): group not converted, its clusters "+
				"are updated with the clusters no group selects (group %s)", dg.GroupName, policyv1alpha1.RemainingGroupName, policyv1alpha1.RemainingGroupName)
			continue
		case seen[name]:
			c.unsupported(path+".groupName", "%q is %s like an earlier group's name in Flotilla: group not converted, a cluster of both is in the "+
				"earlier group", dg.GroupName, name)
			continue
		}
		sel := dg.GroupClusterSelector.LabelSelector
		if why := checkSelector(sel); why != "" {
			c.unsupported(path+".groupClusterSelector.labelSelector", "%s: group not converted", why)
			continue
		}
		if rawSet(dg.GroupClusterSelector.ClaimSelector) {
			c.unsupported(path+".groupClusterSelector.claimSelector", "not converted: Flotilla's groups select clusters by label only, "+
				"so the group also takes clusters the claims would leave out")
		}
		if renamed {
			c.note(path+".groupName", "%s written as %s: Flotilla's group names are DNS labels", dg.GroupName, name)
		}
		if sel == nil {
			// OCM's selector is a value: an absent one is empty and
			// matches every cluster.
			sel = &metav1.LabelSelector{}
		}
		notePeerLabelKeys(c, path+".groupClusterSelector.labelSelector", sel, IsOCMGroup)
		seen[name] = true
		pl.groups = append(pl.groups, ocmGroup{name: dg.GroupName, index: i, group: policyv1alpha1.RolloutGroup{
			GroupName: name, GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: sel}}})
	}
	return nil
}

// perGroup is the Placement's clustersPerDecisionGroup, nil when it is
// OCM's default (100%: no group is split).
func (pl *ocmPlacementInfo) perGroup() *intstr.IntOrString {
	v := pl.spec.DecisionStrategy.GroupStrategy.ClustersPerDecisionGroup
	if v == nil || v.Type == intstr.String && v.StrVal == "100%" {
		return nil
	}
	return v
}

// reportUnused reports OCM objects no conversion used, and kinds hub wrap
// does not convert.
func (idx *ocmIndex) reportUnused(p *peerObject, res *Result) {
	gvk := p.obj.GroupVersionKind()
	desc := describe(gvk.Kind, p.obj.GetNamespace(), p.obj.GetName()) + " (" + gvk.GroupVersion().String() + ")"
	var msg string
	switch {
	case gvk == ocmManifestWorkReplicaSet:
		return
	case gvk == ocmPlacementKind && p.used:
		res.Notes = append(res.Notes, fmt.Sprintf("%s: converted into the placement and rolloutStrategy of the policies of the "+
			"ManifestWorkReplicaSets that name it, not emitted (%s)", describe(gvk.Kind, p.obj.GetNamespace(), p.obj.GetName()), p.src))
		return
	case gvk == ocmPlacementKind && idx.shadowed[p]:
		msg = "an earlier Placement of the input has the same namespace and name, and is the one converted; not emitted"
	case gvk == ocmPlacementKind:
		msg = "no ManifestWorkReplicaSet of the input names it (hub wrap converts a Placement into their policies), not emitted"
	case gvk.Kind == ocmManifestWorkReplicaSet.Kind || gvk.Kind == ocmPlacementKind.Kind:
		msg = fmt.Sprintf("version %s not converted (hub wrap converts %s), not emitted", gvk.Version, map[string]string{
			ocmManifestWorkReplicaSet.Kind: ocmManifestWorkReplicaSet.Version, ocmPlacementKind.Kind: ocmPlacementKind.Version}[gvk.Kind])
	case ocmKindHints[gvk.Kind] != "":
		msg = "kind not converted by hub wrap (" + ocmKindHints[gvk.Kind] + "), not emitted"
	default:
		msg = "kind not converted by hub wrap (it converts ManifestWorkReplicaSet and Placement), not emitted"
	}
	res.Unsupported = append(res.Unsupported, Finding{Object: desc, Message: msg, Source: p.src})
}

// convertMWRS turns a ManifestWorkReplicaSet into a policy selecting its
// manifests' templates, placed and rolled out as its first placementRef
// says.
func convertMWRS(p *peerObject, idx *ocmIndex, opts Options, res *Result) error {
	obj := p.obj.DeepCopy()
	Strip(obj)
	ns := obj.GetNamespace()
	if ns == "" {
		ns = opts.Namespace
	}
	c := &peerConv{res: res, desc: describe("ManifestWorkReplicaSet", ns, obj.GetName()), src: p.src, peer: "OCM"}
	unstructured.RemoveNestedField(obj.Object, mwrsManifestsPath...)
	v, err := decodePeer(obj.Object, func() any { return &ocmMWRS{} }, c)
	if err != nil {
		return err
	}
	mw := v.(*ocmMWRS).Spec
	if len(p.manifests) == 0 {
		c.unsupported(strings.Join(mwrsManifestsPath, "."), "no manifests: nothing to propagate, no policy emitted")
		return nil
	}
	if len(mw.PlacementRefs) == 0 {
		c.unsupported("spec.placementRefs", "no placement: OCM places the manifests nowhere; no policy emitted (it would select every cluster)")
		return nil
	}
	spec := &policyv1alpha1.PropagationSpec{}
	for i := 1; i < len(mw.PlacementRefs); i++ {
		c.unsupported(fmt.Sprintf("spec.placementRefs[%d]", i), "not converted: a Flotilla policy has one placement and one rolloutStrategy "+
			"(placementRefs[0]'s), where OCM places the manifests on every placement's clusters")
	}
	ref := mw.PlacementRefs[0]
	refPath := "spec.placementRefs[0]"
	pl, err := idx.placement(ns, ref.Name, res)
	if err != nil {
		return err
	}
	if pl == nil {
		c.unsupported(refPath+".name", "Placement %s/%s is not in the input: the policy selects every cluster (and a ProgressivePerGroup "+
			"rollout has no groups); wrap the Placement with the ManifestWorkReplicaSet", ns, ref.Name)
	} else if pl.affinity != nil {
		spec.Placement.ClusterAffinity = pl.affinity
	}
	spec.RolloutStrategy = convertOCMRollout(ref.RolloutStrategy, pl, c, refPath+".rolloutStrategy")

	tmpl := mw.ManifestWorkTemplate
	if d := tmpl.DeleteOption; d != nil {
		switch d.PropagationPolicy {
		case "", "Foreground":
		case "Orphan":
			spec.PreserveResourcesOnDeletion = ptrTo(true)
			c.note("spec.manifestWorkTemplate.deleteOption.propagationPolicy", "Orphan written as preserveResourcesOnDeletion: true")
		default:
			c.unsupported("spec.manifestWorkTemplate.deleteOption.propagationPolicy", "%s not converted: Flotilla keeps all of a policy's "+
				"objects on deletion (preserveResourcesOnDeletion) or none", d.PropagationPolicy)
		}
		if rawSet(d.SelectivelyOrphans) {
			c.unsupported("spec.manifestWorkTemplate.deleteOption.selectivelyOrphans", "not converted: Flotilla keeps all of a policy's "+
				"objects on deletion (preserveResourcesOnDeletion) or none")
		}
		if d.TTLSecondsAfterFinished != nil {
			c.unsupported("spec.manifestWorkTemplate.deleteOption.ttlSecondsAfterFinished", "not converted: Flotilla never deletes "+
				"a template's copies because they completed")
		}
	}
	if rawSet(tmpl.ManifestConfigs) {
		c.unsupported("spec.manifestWorkTemplate.manifestConfigs", "not converted: per-manifest feedback rules, update strategies and "+
			"condition rules have no Flotilla equivalent (spec.applyStrategy applies to the whole policy; status comes from the "+
			"resource interpreter)")
	}
	if rawSet(tmpl.Executor) {
		c.unsupported("spec.manifestWorkTemplate.executor", "not converted: Flotilla's agent applies with its own identity")
	}
	if mw.CascadeDeletionPolicy != "" && mw.CascadeDeletionPolicy != "Background" {
		c.unsupported("spec.cascadeDeletionPolicy", "%s not converted: it orders the deletion of OCM's ManifestWorks on the hub, "+
			"which Flotilla has not", mw.CascadeDeletionPolicy)
	}

	// The policy sits with its templates: a PropagationPolicy selects
	// those of its own namespace only.
	namespaces := map[string]bool{}
	clusterScoped := false
	for _, m := range p.manifests {
		if m.namespaced {
			namespaces[templateNamespace(m, opts)] = true
		} else {
			clusterScoped = true
		}
	}
	kind, policyNS := "ClusterPropagationPolicy", ""
	if !clusterScoped && len(namespaces) == 1 {
		kind = "PropagationPolicy"
		for n := range namespaces {
			policyNS = n
		}
	}
	var selectors selectorList
	for i, m := range p.manifests {
		rs := selectorOf(m)
		if m.namespaced && kind == "ClusterPropagationPolicy" {
			rs.Namespace = templateNamespace(m, opts)
		}
		if !selectors.add(rs) {
			c.unsupported(fmt.Sprintf("%s[%d]", strings.Join(mwrsManifestsPath, "."), i), "not selected, nor any later manifest: a Flotilla "+
				"policy has at most %d resourceSelectors (the templates are still written)", maxResourceSelectors)
			break
		}
	}
	spec.ResourceSelectors = selectors.list
	out, err := policyObject(kind, policyNS, obj.GetName(), obj, spec)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", p.src, c.desc, err)
	}
	p.slot.Object = out
	res.peerPolicies = append(res.peerPolicies, p.slot)
	switch {
	case kind == "ClusterPropagationPolicy":
		res.Notes = append(res.Notes, fmt.Sprintf("%s: written as ClusterPropagationPolicy %s, since its manifests are cluster-scoped or in "+
			"several namespaces (a PropagationPolicy selects the templates of its own namespace only) (%s)", c.desc, obj.GetName(), p.src))
	case policyNS != ns:
		res.Notes = append(res.Notes, fmt.Sprintf("%s: written as PropagationPolicy %s/%s, the namespace of its manifests (%s)",
			c.desc, policyNS, obj.GetName(), p.src))
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// convertOCMRollout converts one placementRef's rolloutStrategy; nil when
// it cannot be (reported).
func convertOCMRollout(rs ocmRolloutStrategy, pl *ocmPlacementInfo, c *peerConv, path string) *policyv1alpha1.RolloutStrategy {
	typ := rs.Type
	if typ == "" {
		typ = "All"
	}
	for _, f := range []struct {
		field, typ string
		set        bool
	}{{"all", "All", rs.All != nil}, {"progressive", "Progressive", rs.Progressive != nil}, {"progressivePerGroup", "ProgressivePerGroup", rs.ProgressivePerGroup != nil}} {
		if f.set && f.typ != typ {
			c.note(path+"."+f.field, "dropped: OCM reads it only for type %s, and the type is %s", f.typ, typ)
		}
	}
	if pl != nil && typ != "ProgressivePerGroup" && (len(pl.spec.DecisionStrategy.GroupStrategy.DecisionGroups) > 0 || pl.perGroup() != nil) {
		pl.c.note("spec.decisionStrategy", "not converted for %s: OCM's rollout of type %s uses decision groups only to name mandatoryDecisionGroups",
			strings.TrimPrefix(c.desc, "ManifestWorkReplicaSet "), typ)
	}
	switch typ {
	case "All":
		if a := rs.All; a != nil {
			if pd := a.ProgressDeadline; pd != "" && pd != "None" {
				c.unsupported(path+".all.progressDeadline", "not converted: Flotilla's type All has no gates (every cluster is updated at once); "+
					"OCM counts the clusters that miss the deadline as timed out")
			}
			if a.MinSuccessTime.Duration != 0 {
				c.note(path+".all.minSuccessTime", "dropped: OCM ignores it for type All, as Flotilla's All does")
			}
			if !isZero(a.MaxFailures) {
				c.note(path+".all.maxFailures", "dropped: OCM ignores it for type All, as Flotilla's All does")
			}
		}
		return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeAll}
	case "Progressive":
		p := rs.Progressive
		if p == nil {
			p = &ocmProgressive{}
		}
		ppath := path + ".progressive"
		out := &policyv1alpha1.RolloutProgressive{RolloutConfig: ocmRolloutConfigOf(p.ocmRolloutConfig, c, ppath, false)}
		out.MaxConcurrency = progressiveConcurrency(p.MaxConcurrency, c, ppath+".maxConcurrency")
		if len(p.MandatoryDecisionGroups) > 0 {
			c.unsupported(ppath+".mandatoryDecisionGroups", "not converted: Flotilla's type Progressive has no groups to update first "+
				"(type ProgressivePerGroup puts them first)")
		}
		return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive, Progressive: out}
	case "ProgressivePerGroup":
		return ocmPerGroup(rs.ProgressivePerGroup, pl, c, path)
	}
	c.unsupported(path+".type", "%q is not an OCM rollout type (All, Progressive, ProgressivePerGroup): rolloutStrategy not converted", rs.Type)
	return nil
}

// progressiveConcurrency is Progressive's maxConcurrency: OCM's default
// (and 0) is every cluster at once, Flotilla's is 1.
func progressiveConcurrency(v intstr.IntOrString, c *peerConv, path string) *intstr.IntOrString {
	if isZero(v) {
		all := intstr.FromString("100%")
		c.note(path, "not set (or 0): OCM then updates every cluster at once, Flotilla one at a time; written as 100%%")
		return &all
	}
	mc, ok := concurrency(v)
	if !ok {
		c.unsupported(path, "%s is not a Flotilla maxConcurrency (a number from 1 or a percentage from 1%%), not converted "+
			"(Flotilla then updates one cluster at a time)", v.String())
		return nil
	}
	return mc
}

// ocmRolloutConfig is what every progressive rollout shares.
func ocmRolloutConfigOf(in ocmRolloutConfig, c *peerConv, path string, perGroup bool) policyv1alpha1.RolloutConfig {
	var out policyv1alpha1.RolloutConfig
	if d := in.MinSuccessTime.Duration; d < 0 {
		c.unsupported(path+".minSuccessTime", "negative, not converted")
	} else {
		out.MinSuccessTime = in.MinSuccessTime
	}
	switch pd := strings.TrimSpace(in.ProgressDeadline); pd {
	case "", "None":
		out.ProgressDeadline = &metav1.Duration{Duration: noProgressDeadline}
		c.note(path+".progressDeadline", "None (OCM's default: wait for a cluster indefinitely) written as %s: Flotilla has no unlimited "+
			"deadline, and its default is 10m", durationString(noProgressDeadline))
	default:
		d, err := time.ParseDuration(pd)
		switch {
		case err != nil:
			c.unsupported(path+".progressDeadline", "%q is not a duration, not converted (Flotilla's default is 10m)", pd)
		case d <= 0:
			c.unsupported(path+".progressDeadline", "%s not converted: OCM times every cluster out at once, Flotilla reads it as its "+
				"default (10m)", pd)
		default:
			out.ProgressDeadline = &metav1.Duration{Duration: d}
		}
	}
	if !isZero(in.MaxFailures) {
		mf, ok := failures(in.MaxFailures)
		switch {
		case !ok:
			c.unsupported(path+".maxFailures", "%s is not a Flotilla maxFailures (a number or a percentage), not converted "+
				"(the first failure then halts the rollout)", in.MaxFailures.String())
		default:
			out.MaxFailures = mf
			if perGroup {
				c.note(path+".maxFailures", "OCM counts the failed clusters of the current group against that group's size; Flotilla "+
					"counts the rollout's failed clusters against all of its clusters")
			}
		}
	}
	return out
}

// ocmPerGroup converts ProgressivePerGroup: the Placement's decision groups
// in order, the mandatory ones first.
func ocmPerGroup(in *ocmProgressivePerGroup, pl *ocmPlacementInfo, c *peerConv, path string) *policyv1alpha1.RolloutStrategy {
	if in == nil {
		in = &ocmProgressivePerGroup{}
	}
	gpath := path + ".progressivePerGroup"
	if pl == nil {
		c.unsupported(path, "not converted: type ProgressivePerGroup needs the decision groups of the Placement, which is not in the input")
		return nil
	}
	cfg := ocmRolloutConfigOf(in.ocmRolloutConfig, c, gpath, true)
	if len(pl.spec.DecisionStrategy.GroupStrategy.DecisionGroups) == 0 {
		// OCM's groups are then the selected clusters split by
		// clustersPerDecisionGroup (default: one group of all of them).
		mc := intstr.FromString("100%")
		if v := pl.perGroup(); v != nil {
			if m, ok := concurrency(*v); ok {
				mc = *m
			}
		}
		if len(in.MandatoryDecisionGroups) > 0 {
			c.unsupported(gpath+".mandatoryDecisionGroups", "not converted: the Placement defines no decision groups")
		}
		c.note(path, "the Placement defines no decision groups, so OCM updates groups of clustersPerDecisionGroup (%s) clusters one "+
			"after the other: written as type Progressive with maxConcurrency %s, which starts the next cluster as soon as one "+
			"succeeds rather than the next group once the whole group has", mc.String(), mc.String())
		return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive,
			Progressive: &policyv1alpha1.RolloutProgressive{RolloutConfig: cfg, MaxConcurrency: &mc}}
	}
	if v := pl.perGroup(); v != nil {
		pl.c.unsupported("spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup", "%s not converted: Flotilla does not split "+
			"groups; each decision group, and the clusters no group selects (group %s), is updated as one "+
			"(decisionGroups[].maxConcurrency limits how many of a group's clusters update at once)", v.String(), policyv1alpha1.RemainingGroupName)
	}
	groups := append([]ocmGroup(nil), pl.groups...)
	if len(in.MandatoryDecisionGroups) > 0 {
		first := map[int]bool{} // positions in groups
		for j, md := range in.MandatoryDecisionGroups {
			mpath := fmt.Sprintf("%s.mandatoryDecisionGroups[%d]", gpath, j)
			found := -1
			for k, g := range groups {
				// OCM takes the name, else the index (0 when unset).
				index := 0
				if md.GroupIndex != nil {
					index = int(*md.GroupIndex)
				}
				if md.GroupName != "" && g.name == md.GroupName || md.GroupName == "" && pl.perGroup() == nil && index == g.index {
					found = k
				}
			}
			if found < 0 {
				c.unsupported(mpath, "names no decision group of the Placement that converts, not converted")
				continue
			}
			first[found] = true
		}
		var front, back []ocmGroup
		var names []string
		for k, g := range groups {
			if first[k] {
				front = append(front, g)
				names = append(names, g.group.GroupName)
			} else {
				back = append(back, g)
			}
		}
		groups = append(front, back...)
		if len(names) > 0 {
			msg := fmt.Sprintf("group(s) %s updated first, as OCM does", strings.Join(names, ", "))
			if cfg.MaxFailures != nil {
				msg += "; OCM tolerates no failure in them, Flotilla counts their failures against maxFailures like the others'"
			}
			c.note(gpath+".mandatoryDecisionGroups", "%s", msg)
		}
	}
	if len(groups) > maxDecisionGroups {
		for _, g := range groups[maxDecisionGroups:] {
			pl.c.unsupported(fmt.Sprintf("%s[%d]", pl.groupPath, g.index), "not converted: a Flotilla rollout has at most %d decision groups; "+
				"the group's clusters are updated with group %s, last", maxDecisionGroups, policyv1alpha1.RemainingGroupName)
		}
		groups = groups[:maxDecisionGroups]
	}
	if len(groups) == 0 {
		c.unsupported(path, "not converted: no decision group of the Placement converts")
		return nil
	}
	out := &policyv1alpha1.RolloutProgressivePerGroup{RolloutConfig: cfg}
	for _, g := range groups {
		out.DecisionGroups = append(out.DecisionGroups, g.group)
	}
	return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup, ProgressivePerGroup: out}
}
