package wrap

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// KubeFleet (kubefleet-dev/kubefleet, placement.kubernetes-fleet.io): a
// ClusterResourcePlacement selects cluster-scoped objects of the hub (a
// Namespace with everything in it, usually) and places them on member
// clusters, rolling a change out by its strategy: RollingUpdate, or
// External, where a ClusterStagedUpdateRun applies a
// ClusterStagedUpdateStrategy's stages. Flotilla's equivalent is a
// ClusterPropagationPolicy whose rolloutStrategy is Progressive
// (RollingUpdate) or ProgressivePerGroup with a decision group per stage.

const fleetPlacementGroup = "placement.kubernetes-fleet.io"

var (
	// fleetPlacementVersions are the ClusterResourcePlacement versions
	// hub wrap converts (v1 is the same spec without the staged kinds).
	fleetPlacementVersions = map[string]bool{"v1beta1": true, "v1": true}
	fleetStrategyKind      = schema.GroupVersionKind{Group: fleetPlacementGroup, Version: "v1beta1", Kind: "ClusterStagedUpdateStrategy"}
	fleetRunKind           = schema.GroupVersionKind{Group: fleetPlacementGroup, Version: "v1beta1", Kind: "ClusterStagedUpdateRun"}
)

// fleetKindHints say what to use instead of KubeFleet kinds hub wrap does
// not convert.
var fleetKindHints = map[string]string{
	"ResourcePlacement":                        "hub wrap converts ClusterResourcePlacement only; write a PropagationPolicy",
	"StagedUpdateStrategy":                     "hub wrap converts ClusterStagedUpdateStrategy only; write the decision groups of a ProgressivePerGroup rolloutStrategy",
	"StagedUpdateRun":                          "Flotilla starts a rollout on every change of a template",
	"ClusterApprovalRequest":                   "approve a group with kubectl flotilla rollout approve",
	"ApprovalRequest":                          "approve a group with kubectl flotilla rollout approve",
	"ClusterResourceOverride":                  "write a ClusterOverridePolicy",
	"ResourceOverride":                         "write an OverridePolicy",
	"MemberCluster":                            "register the member with an agent, see docs/agent.md",
	"ClusterResourcePlacementEviction":         "taint the Cluster NoExecute, or use a WorkloadRebalancer",
	"ClusterResourcePlacementDisruptionBudget": "Flotilla has no placement disruption budgets",
	"ClusterResourceSnapshot":                  "written by KubeFleet's controllers; Flotilla keeps a template's revisions itself",
	"ClusterSchedulingPolicySnapshot":          "written by KubeFleet's controllers; the Flotilla hub schedules itself",
	"ClusterResourceBinding":                   "written by KubeFleet's controllers; the Flotilla hub makes its own bindings",
	"Work":                                     "written by KubeFleet's controllers; the Flotilla hub makes its own",
}

// The mirror of the KubeFleet fields hub wrap reads.
type (
	fleetCRP struct {
		peerMeta
		Spec fleetPlacementSpec `json:"spec"`
	}
	fleetPlacementSpec struct {
		ResourceSelectors    []fleetResourceSelector `json:"resourceSelectors"`
		Policy               *fleetPolicy            `json:"policy"`
		Strategy             fleetStrategy           `json:"strategy"`
		RevisionHistoryLimit *int32                  `json:"revisionHistoryLimit"`
		StatusReportingScope string                  `json:"statusReportingScope"`
	}
	fleetResourceSelector struct {
		Group          string                `json:"group"`
		Version        string                `json:"version"`
		Kind           string                `json:"kind"`
		Name           string                `json:"name"`
		LabelSelector  *metav1.LabelSelector `json:"labelSelector"`
		SelectionScope string                `json:"selectionScope"`
	}
	fleetPolicy struct {
		PlacementType    string   `json:"placementType"`
		ClusterNames     []string `json:"clusterNames"`
		NumberOfClusters *int32   `json:"numberOfClusters"`
		Affinity         *struct {
			ClusterAffinity *struct {
				Required *struct {
					ClusterSelectorTerms []fleetSelectorTerm `json:"clusterSelectorTerms"`
				} `json:"requiredDuringSchedulingIgnoredDuringExecution"`
				Preferred json.RawMessage `json:"preferredDuringSchedulingIgnoredDuringExecution"`
			} `json:"clusterAffinity"`
		} `json:"affinity"`
		TopologySpreadConstraints json.RawMessage   `json:"topologySpreadConstraints"`
		Tolerations               []fleetToleration `json:"tolerations"`
	}
	fleetSelectorTerm struct {
		LabelSelector    *metav1.LabelSelector `json:"labelSelector"`
		PropertySelector json.RawMessage       `json:"propertySelector"`
		PropertySorter   json.RawMessage       `json:"propertySorter"`
	}
	fleetToleration struct {
		Key      string `json:"key"`
		Operator string `json:"operator"`
		Value    string `json:"value"`
		Effect   string `json:"effect"`
	}
	fleetStrategy struct {
		Type           string              `json:"type"`
		RollingUpdate  *fleetRollingUpdate `json:"rollingUpdate"`
		ApplyStrategy  *fleetApplyStrategy `json:"applyStrategy"`
		DeleteStrategy *struct {
			PropagationPolicy string `json:"propagationPolicy"`
		} `json:"deleteStrategy"`
		ReportBackStrategy json.RawMessage `json:"reportBackStrategy"`
	}
	fleetRollingUpdate struct {
		MaxUnavailable           *intstr.IntOrString `json:"maxUnavailable"`
		MaxSurge                 *intstr.IntOrString `json:"maxSurge"`
		UnavailablePeriodSeconds *int64              `json:"unavailablePeriodSeconds"`
	}
	fleetApplyStrategy struct {
		ComparisonOption      string `json:"comparisonOption"`
		WhenToApply           string `json:"whenToApply"`
		Type                  string `json:"type"`
		AllowCoOwnership      bool   `json:"allowCoOwnership"`
		ServerSideApplyConfig *struct {
			Force bool `json:"force"`
		} `json:"serverSideApplyConfig"`
		WhenToTakeOver string `json:"whenToTakeOver"`
	}

	fleetStagedStrategy struct {
		peerMeta
		Spec struct {
			Stages []fleetStage `json:"stages"`
		} `json:"spec"`
	}
	fleetStage struct {
		Name             string                `json:"name"`
		LabelSelector    *metav1.LabelSelector `json:"labelSelector"`
		SortingLabelKey  *string               `json:"sortingLabelKey"`
		MaxConcurrency   *intstr.IntOrString   `json:"maxConcurrency"`
		AfterStageTasks  []fleetStageTask      `json:"afterStageTasks"`
		BeforeStageTasks []fleetStageTask      `json:"beforeStageTasks"`
	}
	fleetStageTask struct {
		Type     string           `json:"type"`
		WaitTime *metav1.Duration `json:"waitTime"`
	}

	fleetRun struct {
		peerMeta
		Spec struct {
			PlacementName         string `json:"placementName"`
			ResourceSnapshotIndex string `json:"resourceSnapshotIndex"`
			StrategyName          string `json:"stagedRolloutStrategyName"`
			State                 string `json:"state"`
		} `json:"spec"`
	}
)

// fleetIndex is what a ClusterResourcePlacement's conversion reads besides
// the placement: the input's strategies and runs, and the native objects a
// Namespace selector takes along.
type fleetIndex struct {
	res        *Result
	opts       Options
	noted      map[schema.GroupKind]bool
	strategies map[string]*fleetStrategyInfo // by name, the first of a name
	strategyN  int                           // ClusterStagedUpdateStrategies in the input
	runs       map[string][]*fleetRunInfo    // by the placement they name, in input order
	runOf      map[*peerObject]*fleetRunInfo
	crps       map[string]bool      // the ClusterResourcePlacements of the input
	shadowed   map[*peerObject]bool // a strategy of the same name came first
	namespaces []*pending           // the input's Namespaces
	nsKinds    map[string][]policyv1alpha1.ResourceSelector
}

type fleetStrategyInfo struct {
	p       *peerObject
	done    bool
	err     error
	rollout *policyv1alpha1.RolloutStrategy
}

type fleetRunInfo struct {
	p    *peerObject
	spec *fleetRun
}

func newFleetIndex(peers []*peerObject, natives []*pending, opts Options, noted map[schema.GroupKind]bool, res *Result) (*fleetIndex, error) {
	idx := &fleetIndex{res: res, opts: opts, noted: noted, strategies: map[string]*fleetStrategyInfo{}, crps: map[string]bool{},
		runs: map[string][]*fleetRunInfo{}, runOf: map[*peerObject]*fleetRunInfo{}, shadowed: map[*peerObject]bool{}, nsKinds: map[string][]policyv1alpha1.ResourceSelector{}}
	for _, p := range peers {
		gvk := p.obj.GroupVersionKind()
		switch {
		case gvk == fleetStrategyKind:
			idx.strategyN++
			if idx.strategies[p.obj.GetName()] == nil {
				idx.strategies[p.obj.GetName()] = &fleetStrategyInfo{p: p}
			} else {
				idx.shadowed[p] = true
			}
		case gvk == fleetRunKind:
			obj := p.obj.DeepCopy()
			Strip(obj)
			c := &peerConv{res: res, desc: describe(gvk.Kind, "", obj.GetName()), src: p.src, peer: "KubeFleet"}
			v, err := decodePeer(obj.Object, func() any { return &fleetRun{} }, c)
			if err != nil {
				return nil, err
			}
			r := &fleetRunInfo{p: p, spec: v.(*fleetRun)}
			idx.runs[r.spec.Spec.PlacementName] = append(idx.runs[r.spec.Spec.PlacementName], r)
			idx.runOf[p] = r
		case gvk.Group == fleetPlacementGroup && gvk.Kind == "ClusterResourcePlacement" && fleetPlacementVersions[gvk.Version]:
			idx.crps[p.obj.GetName()] = true
		}
	}
	seen := map[policyv1alpha1.ResourceSelector]bool{}
	for _, n := range natives {
		if n.obj.GetAPIVersion() == "v1" && n.obj.GetKind() == "Namespace" {
			idx.namespaces = append(idx.namespaces, n)
			continue
		}
		if !n.namespaced {
			continue
		}
		rs := policyv1alpha1.ResourceSelector{APIVersion: n.obj.GetAPIVersion(), Kind: n.obj.GetKind(), Namespace: templateNamespace(n, opts)}
		if !seen[rs] {
			seen[rs] = true
			idx.nsKinds[rs.Namespace] = append(idx.nsKinds[rs.Namespace], rs)
		}
	}
	return idx, nil
}

// convertCRP turns a ClusterResourcePlacement into a
// ClusterPropagationPolicy of the same name.
func convertCRP(p *peerObject, idx *fleetIndex, res *Result) error {
	obj := p.obj.DeepCopy()
	Strip(obj)
	name := obj.GetName()
	c := &peerConv{res: res, desc: describe("ClusterResourcePlacement", "", name), src: p.src, peer: "KubeFleet"}
	v, err := decodePeer(obj.Object, func() any { return &fleetCRP{} }, c)
	if err != nil {
		return err
	}
	in := v.(*fleetCRP).Spec
	spec := &policyv1alpha1.PropagationSpec{}
	spec.ResourceSelectors = idx.resourceSelectors(in.ResourceSelectors, c)
	if len(spec.ResourceSelectors) == 0 {
		c.unsupported("spec.resourceSelectors", "no resource selector converts: nothing to propagate, no policy emitted")
		return nil
	}
	if !fleetPlacement(in.Policy, &spec.Placement, c) {
		return nil
	}

	switch typ := in.Strategy.Type; typ {
	case "", "RollingUpdate":
		spec.RolloutStrategy = fleetRolling(in.Strategy.RollingUpdate, c)
	case "External":
		spec.RolloutStrategy = idx.stagedRollout(name, c)
		if in.Strategy.RollingUpdate != nil {
			c.note("spec.strategy.rollingUpdate", "dropped: KubeFleet reads it only for type RollingUpdate")
		}
	default:
		c.unsupported("spec.strategy.type", "%q is not a KubeFleet rollout type (RollingUpdate, External): rolloutStrategy not converted", typ)
	}
	fleetApply(in.Strategy.ApplyStrategy, spec, c)
	if d := in.Strategy.DeleteStrategy; d != nil {
		switch d.PropagationPolicy {
		case "", "Delete":
		case "Abandon":
			spec.PreserveResourcesOnDeletion = ptrTo(true)
			c.note("spec.strategy.deleteStrategy.propagationPolicy", "Abandon written as preserveResourcesOnDeletion: true")
		default:
			c.unsupported("spec.strategy.deleteStrategy.propagationPolicy", "%q not converted (KubeFleet's are Abandon and Delete)", d.PropagationPolicy)
		}
	}
	if rawSet(in.Strategy.ReportBackStrategy) {
		c.unsupported("spec.strategy.reportBackStrategy", "not converted: Flotilla reports the members' status on the binding and the "+
			"template (status aggregation), not mirrored elsewhere")
	}
	if l := in.RevisionHistoryLimit; l != nil {
		switch {
		case spec.RolloutStrategy == nil:
			c.unsupported("spec.revisionHistoryLimit", "not converted: no rolloutStrategy to hold it")
		case *l < 1 || *l > 100:
			c.unsupported("spec.revisionHistoryLimit", "%d not converted: Flotilla keeps from 1 to 100 revisions", *l)
		default:
			spec.RolloutStrategy.RevisionHistoryLimit = ptrTo(*l)
			c.note("spec.revisionHistoryLimit", "written as rolloutStrategy.revisionHistoryLimit: Flotilla keeps that many revisions of each "+
				"template (besides the newest, the last completed and those a cluster runs), KubeFleet that many snapshots of the placement")
		}
	}
	if s := in.StatusReportingScope; s != "" && s != "ClusterScopeOnly" {
		c.unsupported("spec.statusReportingScope", "%s not converted: Flotilla reports a namespaced template's status on the template, "+
			"in its namespace, whatever the policy", s)
	}
	out, err := policyObject("ClusterPropagationPolicy", "", name, obj, spec)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", p.src, c.desc, err)
	}
	p.slot.Object = out
	res.peerPolicies = append(res.peerPolicies, p.slot)
	return nil
}

// resourceSelectors converts what a placement selects. KubeFleet selects
// cluster-scoped objects; a Namespace takes everything in it along, which a
// Flotilla selector (one kind each) can only name kind by kind: the kinds of
// that namespace the input holds.
func (idx *fleetIndex) resourceSelectors(terms []fleetResourceSelector, c *peerConv) []policyv1alpha1.ResourceSelector {
	var out selectorList
	reported := false
	add := func(path string, rs policyv1alpha1.ResourceSelector) {
		if !out.add(rs) && !reported {
			reported = true
			c.unsupported(path, "not converted, nor anything later: a Flotilla policy has at most %d resourceSelectors", maxResourceSelectors)
		}
	}
	// NamespaceWithResourceSelectors: the other selectors' namespaced
	// kinds are taken from that one namespace.
	within := ""
	for _, t := range terms {
		if t.Group == "" && t.Kind == "Namespace" && t.SelectionScope == "NamespaceWithResourceSelectors" {
			within = t.Name
		}
	}
	for i, t := range terms {
		if reported {
			break
		}
		path := fmt.Sprintf("spec.resourceSelectors[%d]", i)
		if t.Kind == "" || t.Version == "" {
			c.unsupported(path, "no kind or no version, not converted")
			continue
		}
		if why := checkSelector(t.LabelSelector); why != "" {
			c.unsupported(path+".labelSelector", "%s: selector not converted", why)
			continue
		}
		apiVersion := t.Version
		if t.Group != "" {
			apiVersion = t.Group + "/" + t.Version
		}
		rs := policyv1alpha1.ResourceSelector{APIVersion: apiVersion, Kind: t.Kind, Name: t.Name}
		if t.Name == "" {
			rs.LabelSelector = t.LabelSelector
		}
		if t.Group == "" && t.Kind == "Namespace" {
			add(path, rs)
			switch t.SelectionScope {
			case "NamespaceOnly", "NamespaceWithResourceSelectors":
			case "", "NamespaceWithResources":
				idx.namespaceContents(path, t, c, &out, add)
			default:
				c.unsupported(path+".selectionScope", "%q not converted: only the Namespace itself is selected", t.SelectionScope)
			}
			continue
		}
		gvk := schema.FromAPIVersionAndKind(apiVersion, t.Kind)
		if scopeOf(gvk, idx.opts, idx.noted, idx.res) {
			if within == "" {
				c.unsupported(path, "not converted: %s is namespaced, and a ClusterResourcePlacement selects only cluster-scoped objects "+
					"(KubeFleet selects nothing here)", groupKindString(gvk.GroupKind()))
				continue
			}
			rs.Namespace = within
		}
		add(path, rs)
	}
	return out.list
}

// namespaceContents adds selectors for what a NamespaceWithResources
// selector takes along: every kind the input holds in those namespaces.
func (idx *fleetIndex) namespaceContents(path string, t fleetResourceSelector, c *peerConv, out *selectorList, add func(string, policyv1alpha1.ResourceSelector)) {
	var names []string
	if t.Name != "" {
		names = []string{t.Name}
	} else {
		sel := labels.Everything()
		if t.LabelSelector != nil {
			sel, _ = metav1.LabelSelectorAsSelector(t.LabelSelector) // checked by the caller
		}
		for _, n := range idx.namespaces {
			if out.full() {
				break
			}
			if sel.Matches(labels.Set(n.obj.GetLabels())) {
				names = append(names, n.obj.GetName())
			}
		}
	}
	var kinds, empty []string
	for _, ns := range names {
		if out.full() {
			break
		}
		found := idx.nsKinds[ns]
		if len(found) == 0 {
			empty = append(empty, ns)
		}
		for _, rs := range found {
			add(path, rs)
			kinds = append(kinds, fmt.Sprintf("%s in %s", groupKindString(schema.FromAPIVersionAndKind(rs.APIVersion, rs.Kind).GroupKind()), ns))
		}
	}
	msg := "KubeFleet places every object of the namespace along with it; a Flotilla selector names one kind"
	if len(kinds) > 0 {
		msg += ", so selectors were added for the kinds the input holds there (" + strings.Join(kinds, ", ") + "): objects of other " +
			"kinds in the namespace are not selected; wrap them and add a selector for their kind"
	}
	if len(empty) > 0 {
		msg += fmt.Sprintf("; the input holds no object of namespace %s, so only the Namespace is selected: wrap its objects with "+
			"the placement", strings.Join(empty, ", "))
	}
	if t.Name == "" {
		msg += "; namespaces are matched among the input's Namespace objects, so a namespace created later gets its Namespace but not its objects"
	}
	c.note(path, "%s", msg)
}

// fleetPlacement converts the placement policy into p; false when the
// policy places nothing or cannot be converted (reported; no policy is
// emitted, as it would select every cluster).
func fleetPlacement(pol *fleetPolicy, p *policyv1alpha1.Placement, c *peerConv) bool {
	if pol == nil {
		return true
	}
	typ := pol.PlacementType
	if typ == "" {
		typ = "PickAll"
	}
	switch typ {
	case "PickFixed":
		switch {
		case len(pol.ClusterNames) == 0:
			c.unsupported("spec.policy.clusterNames", "PickFixed without clusterNames places nothing; no policy emitted")
			return false
		case len(pol.ClusterNames) > maxClusterNames:
			c.unsupported("spec.policy.clusterNames", "%d names, Flotilla's clusterNames holds at most %d; no policy emitted",
				len(pol.ClusterNames), maxClusterNames)
			return false
		}
		p.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: pol.ClusterNames}
	case "PickAll", "PickN":
		if typ == "PickN" {
			switch n := pol.NumberOfClusters; {
			case n == nil || *n <= 0:
				c.unsupported("spec.policy.numberOfClusters", "PickN of no cluster places nothing; no policy emitted")
				return false
			default:
				p.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: *n, MinGroups: 1}}
				c.note("spec.policy.numberOfClusters", "written as spreadConstraints [{spreadByField: cluster, minGroups: 1, maxGroups: %d}]: "+
					"Flotilla's scheduler takes the best-scored clusters (those that already run the object, then by name), KubeFleet "+
					"ranks them by preferred affinities and topology spread", *n)
			}
		} else if pol.NumberOfClusters != nil {
			c.note("spec.policy.numberOfClusters", "dropped: KubeFleet reads it only for PickN")
		}
		if a := pol.Affinity; a != nil && a.ClusterAffinity != nil {
			ca := a.ClusterAffinity
			if r := ca.Required; r != nil {
				for i, term := range r.ClusterSelectorTerms {
					path := fmt.Sprintf("spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[%d]", i)
					if i > 0 {
						c.unsupported(path, "not converted: KubeFleet ORs the terms, Flotilla's cluster affinity holds one label selector "+
							"(clusterSelectorTerms[0]'s)")
						continue
					}
					if rawSet(term.PropertySelector) {
						c.unsupported(path+".propertySelector", "not converted: Flotilla's cluster affinity selects by label and field "+
							"(provider, region, zone), not by cluster properties")
					}
					if rawSet(term.PropertySorter) {
						c.unsupported(path+".propertySorter", "not converted: Flotilla's scheduler does not rank clusters by properties")
					}
					if emptySelector(term.LabelSelector) {
						continue
					}
					if why := checkSelector(term.LabelSelector); why != "" {
						c.unsupported(path+".labelSelector", "%s, not converted", why)
						continue
					}
					p.ClusterAffinity = &policyv1alpha1.ClusterAffinity{LabelSelector: term.LabelSelector}
					c.note(path+".labelSelector", "when no cluster matches any more, Flotilla keeps the workload where it runs and says "+
						"Scheduled=False")
					notePeerLabelKeys(c, path+".labelSelector", term.LabelSelector, isFleetLabelDomain)
				}
			}
			if rawSet(ca.Preferred) {
				if typ == "PickAll" {
					c.note("spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution", "dropped: KubeFleet ignores "+
						"preferences for PickAll")
				} else {
					c.unsupported("spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution", "not converted: "+
						"Flotilla's scheduler ranks clusters by its own score")
				}
			}
		}
		if rawSet(pol.TopologySpreadConstraints) {
			c.unsupported("spec.policy.topologySpreadConstraints", "not converted: KubeFleet's skew-based spread has no Flotilla equivalent "+
				"(Flotilla's spreadConstraints choose groups by minGroups/maxGroups)")
		}
	default:
		c.unsupported("spec.policy.placementType", "%q is not a KubeFleet placement type (PickAll, PickN, PickFixed); no policy emitted", typ)
		return false
	}
	if typ == "PickFixed" && len(pol.Tolerations) > 0 {
		c.note("spec.policy.tolerations", "dropped: KubeFleet does not allow them with PickFixed")
		return true
	}
	for i, t := range pol.Tolerations {
		path := fmt.Sprintf("spec.policy.tolerations[%d]", i)
		op := corev1.TolerationOperator(t.Operator)
		switch {
		case op != "" && op != corev1.TolerationOpEqual && op != corev1.TolerationOpExists:
			c.unsupported(path+".operator", "%q not converted (Equal or Exists)", t.Operator)
			continue
		case t.Effect != "" && t.Effect != string(corev1.TaintEffectNoSchedule):
			c.unsupported(path+".effect", "%q not converted (KubeFleet's taints are NoSchedule)", t.Effect)
			continue
		case len(p.ClusterTolerations) >= 64:
			c.unsupported(path, "not converted: Flotilla's clusterTolerations holds at most 64")
			continue
		}
		p.ClusterTolerations = append(p.ClusterTolerations, corev1.Toleration{Key: t.Key, Operator: op, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if len(p.ClusterTolerations) > 0 {
		c.note("spec.policy.tolerations", "written as spec.placement.clusterTolerations: they tolerate the taints of Flotilla's Clusters "+
			"(KubeFleet's are on its MemberClusters)")
	}
	return true
}

// KubeFleet's rolling update defaults.
var (
	fleetDefaultMaxUnavailable = intstr.FromString("25%")
	fleetDefaultUnavailable    = int64(60)
)

// fleetRolling converts a rolling update into a Progressive rollout.
func fleetRolling(ru *fleetRollingUpdate, c *peerConv) *policyv1alpha1.RolloutStrategy {
	const path = "spec.strategy.rollingUpdate"
	if ru == nil {
		ru = &fleetRollingUpdate{}
	}
	out := &policyv1alpha1.RolloutProgressive{}
	mu := ru.MaxUnavailable
	if mu == nil {
		mu = &fleetDefaultMaxUnavailable
		c.note(path+".maxUnavailable", "not set: KubeFleet's default, 25%%, written as maxConcurrency (Flotilla's default is 1)")
	}
	switch mc, ok := concurrency(*mu); {
	case isZero(*mu):
		c.unsupported(path+".maxUnavailable", "0 not converted: Flotilla updates at least one cluster at a time, where KubeFleet "+
			"moves a placement only by adding clusters first (maxSurge) and stalls an in-place update")
	case !ok:
		c.unsupported(path+".maxUnavailable", "%s is not a Flotilla maxConcurrency (a number from 1 or a percentage from 1%%), not converted", mu.String())
	default:
		out.MaxConcurrency = mc
	}
	secs, given := ru.UnavailablePeriodSeconds, "written"
	if secs == nil {
		secs, given = &fleetDefaultUnavailable, "not set: KubeFleet's default, 60, written"
	}
	switch {
	case *secs < 0:
		c.unsupported(path+".unavailablePeriodSeconds", "negative, not converted")
	case *secs > int64(noProgressDeadline/time.Second):
		c.unsupported(path+".unavailablePeriodSeconds", "%d not converted: more than ten years", *secs)
	case *secs > 0:
		out.MinSuccessTime = metav1.Duration{Duration: time.Duration(*secs) * time.Second}
		c.note(path+".unavailablePeriodSeconds", "%s as minSuccessTime %s: Flotilla holds every updated cluster's copy Healthy "+
			"that long before the cluster counts as updated; KubeFleet waits that long after applying only for objects whose "+
			"availability it cannot tell (not Deployments, StatefulSets, DaemonSets, Services, ...), and not for the others",
			given, durationString(out.MinSuccessTime.Duration))
	}
	if ru.MaxSurge != nil {
		c.unsupported(path+".maxSurge", "not converted: Flotilla updates the clusters in place and does not add clusters beyond the "+
			"placement while it removes others")
	}
	c.note("spec.strategy", "KubeFleet has no progress deadline and no failure limit (a cluster that does not become available "+
		"keeps one of maxUnavailable's places and the rollout goes on with the others); Flotilla counts a copy that is not Healthy "+
		"within progressDeadline (10m) as failed and halts the rollout at the first failure (maxFailures 0)")
	return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive, Progressive: out}
}

// fleetApply converts the apply strategy: how members write, and whether
// they take over objects that exist.
func fleetApply(a *fleetApplyStrategy, spec *policyv1alpha1.PropagationSpec, c *peerConv) {
	const path = "spec.strategy.applyStrategy"
	if a == nil {
		a = &fleetApplyStrategy{}
	}
	switch a.Type {
	case "":
	case "ClientSideApply":
		c.note(path+".type", "Flotilla's members apply server-side (applyStrategy ServerSideApply), not with KubeFleet's client-side "+
			"three-way merge: fields another manager owns on a member are kept")
	case "ServerSideApply":
		spec.ApplyStrategy = policyv1alpha1.ApplyStrategyServerSideApply
	case "ReportDiff":
		c.unsupported(path+".type", "ReportDiff not converted: Flotilla's ReadOnly reports an existing object's status, not its "+
			"differences from the template")
	default:
		c.unsupported(path+".type", "%q not converted (KubeFleet's are ClientSideApply, ServerSideApply, ReportDiff)", a.Type)
	}
	if s := a.ServerSideApplyConfig; s != nil && s.Force {
		c.unsupported(path+".serverSideApplyConfig.force", "not converted: Flotilla's agent does not force server-side apply conflicts")
	}
	if a.ComparisonOption != "" && a.ComparisonOption != "PartialComparison" {
		c.unsupported(path+".comparisonOption", "%s not converted: Flotilla has no drift detection", a.ComparisonOption)
	}
	if a.WhenToApply != "" && a.WhenToApply != "Always" {
		c.unsupported(path+".whenToApply", "%s not converted: Flotilla's agent always applies the template", a.WhenToApply)
	}
	if a.AllowCoOwnership {
		c.unsupported(path+".allowCoOwnership", "not converted: Flotilla shares no object with another owner")
	}
	switch a.WhenToTakeOver {
	case "", "Always":
		spec.ConflictResolution = policyv1alpha1.ConflictOverwrite
		c.note(path+".whenToTakeOver", "Always (KubeFleet's default: take over an object that already exists on a member) written as "+
			"conflictResolution: Overwrite (Flotilla's default, Abort, leaves it and reports a conflict)")
	case "Never":
		spec.ConflictResolution = policyv1alpha1.ConflictAbort
	case "IfNoDiff":
		spec.ConflictResolution = policyv1alpha1.ConflictAbort
		c.unsupported(path+".whenToTakeOver", "IfNoDiff not converted: Flotilla takes over an existing object with Overwrite whatever "+
			"it holds; conflictResolution: Abort written")
	default:
		c.unsupported(path+".whenToTakeOver", "%q not converted (KubeFleet's are Always, IfNoDiff, Never)", a.WhenToTakeOver)
	}
}

// stagedRollout finds the staged strategy of an External placement (the
// one its ClusterStagedUpdateRun names, else the input's only one) and
// returns its rollout.
func (idx *fleetIndex) stagedRollout(placement string, c *peerConv) *policyv1alpha1.RolloutStrategy {
	const path = "spec.strategy.type"
	var run *fleetRunInfo
	n := 0
	for _, r := range idx.runs[placement] {
		if run != nil && run.spec.Spec.StrategyName != r.spec.Spec.StrategyName {
			n++
		}
		run = r
	}
	var st *fleetStrategyInfo
	switch {
	case run != nil:
		run.p.used = true
		st = idx.strategies[run.spec.Spec.StrategyName]
		if st == nil {
			c.unsupported(path, "External: ClusterStagedUpdateStrategy %s, which ClusterStagedUpdateRun %s names, is not in the input: "+
				"rolloutStrategy not converted (Flotilla would update every cluster at once)", run.spec.Spec.StrategyName, run.p.obj.GetName())
			return nil
		}
		if n > 0 {
			c.note(path, "External: the input's ClusterStagedUpdateRuns of this placement name different strategies; converted with %s, "+
				"which the last of them (%s) names", run.spec.Spec.StrategyName, run.p.obj.GetName())
		}
	case idx.strategyN == 1:
		for _, s := range idx.strategies {
			st = s
		}
		c.note(path, "External: no ClusterStagedUpdateRun of the input names this placement; converted with the input's only "+
			"ClusterStagedUpdateStrategy, %s", st.p.obj.GetName())
	default:
		c.unsupported(path, "External: no ClusterStagedUpdateRun of the input names this placement and a strategy, and the input holds "+
			"%d ClusterStagedUpdateStrategies: rolloutStrategy not converted (Flotilla would update every cluster at once)", idx.strategyN)
		return nil
	}
	st.p.used = true
	if !st.done {
		st.done = true
		st.rollout, st.err = fleetStaged(st.p, idx.res)
	}
	if st.err != nil {
		c.unsupported(path, "External: ClusterStagedUpdateStrategy %s does not convert (%v)", st.p.obj.GetName(), st.err)
		return nil
	}
	if st.rollout == nil {
		c.unsupported(path, "External: ClusterStagedUpdateStrategy %s has no stage that converts: rolloutStrategy not converted", st.p.obj.GetName())
		return nil
	}
	c.note(path, "External: KubeFleet rolls a change out when a ClusterStagedUpdateRun is created for it, and waits for each cluster "+
		"without a deadline; Flotilla rolls out every change of a selected template by the stages of ClusterStagedUpdateStrategy %s, "+
		"and counts a copy that is not Healthy within progressDeadline (10m) as failed, which halts the rollout", st.p.obj.GetName())
	return st.rollout.DeepCopy()
}

// fleetStaged converts a ClusterStagedUpdateStrategy's stages into a
// ProgressivePerGroup rollout, one decision group per stage; nil when no
// stage converts.
func fleetStaged(p *peerObject, res *Result) (*policyv1alpha1.RolloutStrategy, error) {
	obj := p.obj.DeepCopy()
	Strip(obj)
	c := &peerConv{res: res, desc: describe(fleetStrategyKind.Kind, "", obj.GetName()), src: p.src, peer: "KubeFleet"}
	v, err := decodePeer(obj.Object, func() any { return &fleetStagedStrategy{} }, c)
	if err != nil {
		return nil, err
	}
	stages := v.(*fleetStagedStrategy).Spec.Stages
	out := &policyv1alpha1.RolloutProgressivePerGroup{}
	seen := map[string]bool{}
	var wait time.Duration
	var waitPaths []string
	for i, st := range stages {
		path := fmt.Sprintf("spec.stages[%d]", i)
		if len(out.DecisionGroups) >= maxDecisionGroups {
			c.unsupported(path, "not converted: a Flotilla rollout has at most %d decision groups; the stage's clusters are updated "+
				"with group %s, last", maxDecisionGroups, policyv1alpha1.RemainingGroupName)
			continue
		}
		name, renamed := groupName(st.Name)
		why := "Flotilla's group names are DNS labels"
		if st.Name == policyv1alpha1.RemainingGroupName {
			name, renamed = "remaining-stage", true
			why = fmt.Sprintf("%q names the clusters no group selects", policyv1alpha1.RemainingGroupName)
		}
		switch {
		case name == "":
			c.unsupported(path+".name", "%q is not a Flotilla group name (a DNS label): stage not converted, its clusters are updated "+
				"with group %s", st.Name, policyv1alpha1.RemainingGroupName)
			continue
		case seen[name]:
			c.unsupported(path+".name", "%q names an earlier stage too: stage not converted", st.Name)
			continue
		case st.LabelSelector == nil:
			c.unsupported(path+".labelSelector", "not set: the stage holds no cluster in KubeFleet; stage not converted, nor its tasks")
			continue
		}
		if why := checkSelector(st.LabelSelector); why != "" {
			c.unsupported(path+".labelSelector", "%s: stage not converted", why)
			continue
		}
		if renamed {
			c.note(path+".name", "%s written as %s: %s", st.Name, name, why)
		}
		g := policyv1alpha1.RolloutGroup{GroupName: name, GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: st.LabelSelector}}
		notePeerLabelKeys(c, path+".labelSelector", st.LabelSelector, isFleetLabelDomain)
		if st.SortingLabelKey != nil && *st.SortingLabelKey != "" {
			c.unsupported(path+".sortingLabelKey", "not converted: Flotilla updates a group's clusters in name order")
		}
		// KubeFleet updates a stage's clusters one at a time unless told
		// otherwise; Flotilla a group's all at once.
		one := intstr.FromInt32(1)
		g.MaxConcurrency = &one
		if mc := st.MaxConcurrency; mc != nil {
			switch v, ok := concurrency(*mc); {
			case !ok:
				c.unsupported(path+".maxConcurrency", "%s is not a Flotilla maxConcurrency, not converted (1 written, KubeFleet's default)", mc.String())
			default:
				g.MaxConcurrency = v
				if v.Type == intstr.String {
					c.note(path+".maxConcurrency", "KubeFleet rounds a percentage of the stage's clusters down, Flotilla up")
				}
			}
		}
		for j, task := range st.AfterStageTasks {
			tpath := fmt.Sprintf("%s.afterStageTasks[%d]", path, j)
			switch task.Type {
			case "Approval":
				g.Approval = policyv1alpha1.ApprovalRequired
			case "TimedWait":
				if task.WaitTime == nil || task.WaitTime.Duration <= 0 {
					c.unsupported(tpath+".waitTime", "not a positive duration, not converted")
					continue
				}
				wait = max(wait, task.WaitTime.Duration)
				waitPaths = append(waitPaths, tpath)
			default:
				c.unsupported(tpath+".type", "%q not converted (KubeFleet's are TimedWait and Approval)", task.Type)
			}
		}
		for j, task := range st.BeforeStageTasks {
			tpath := fmt.Sprintf("%s.beforeStageTasks[%d]", path, j)
			switch {
			case task.Type != "Approval":
				c.unsupported(tpath+".type", "%q not converted (a stage's beforeStageTasks are approvals)", task.Type)
			case len(out.DecisionGroups) == 0:
				c.unsupported(tpath, "not converted: Flotilla's approvals come after a group, and no group precedes this one")
			default:
				prev := &out.DecisionGroups[len(out.DecisionGroups)-1]
				prev.Approval = policyv1alpha1.ApprovalRequired
				c.note(tpath, "written as the approval of the group before, %s: Flotilla asks for it once that group has succeeded", prev.GroupName)
			}
		}
		seen[name] = true
		out.DecisionGroups = append(out.DecisionGroups, g)
	}
	if len(out.DecisionGroups) == 0 {
		return nil, nil
	}
	if wait > 0 {
		out.MinSuccessTime = metav1.Duration{Duration: wait}
		for _, p := range waitPaths {
			c.note(p, "written as the rollout's minSuccessTime %s (the largest waitTime of the stages): Flotilla holds each updated "+
				"cluster's copy Healthy that long before it counts, in every group; KubeFleet waits that long once, after the whole "+
				"stage is updated, and only after this stage", durationString(wait))
		}
	}
	c.note("spec.stages", "a cluster no stage selects makes KubeFleet's update run fail to start (each cluster must be in exactly one "+
		"stage); Flotilla updates it last, in group %s, and a cluster two stages select in the first of them", policyv1alpha1.RemainingGroupName)
	return &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup, ProgressivePerGroup: out}, nil
}

// reportUnused reports KubeFleet objects no conversion used, and kinds hub
// wrap does not convert.
func (idx *fleetIndex) reportUnused(p *peerObject, res *Result) {
	gvk := p.obj.GroupVersionKind()
	name := describe(gvk.Kind, p.obj.GetNamespace(), p.obj.GetName())
	desc := name + " (" + gvk.GroupVersion().String() + ")"
	var msg string
	switch {
	case gvk.Group == fleetPlacementGroup && gvk.Kind == "ClusterResourcePlacement" && fleetPlacementVersions[gvk.Version]:
		return
	case (gvk == fleetStrategyKind || gvk == fleetRunKind) && p.used:
		res.Notes = append(res.Notes, fmt.Sprintf("%s: converted into the rolloutStrategy of the ClusterPropagationPolicy of the "+
			"ClusterResourcePlacement it serves, not emitted (%s)", name, p.src))
		return
	case gvk == fleetStrategyKind && idx.shadowed[p]:
		msg = "an earlier ClusterStagedUpdateStrategy of the input has the same name, and is the one converted; not emitted"
	case gvk == fleetStrategyKind:
		msg = "no converted ClusterResourcePlacement of type External uses it (through a ClusterStagedUpdateRun of the input), not emitted"
	case gvk == fleetRunKind && idx.runOf[p] != nil && idx.crps[idx.runOf[p].spec.Spec.PlacementName]:
		msg = "the ClusterResourcePlacement it names is not of type External, so it reads no strategy (Flotilla starts a rollout on " +
			"every change of a template), not emitted"
	case gvk == fleetRunKind:
		msg = "the ClusterResourcePlacement it names is not in the input (Flotilla starts a rollout on every change of a template), not emitted"
	case gvk.Group == fleetPlacementGroup && gvk.Kind == "ClusterResourcePlacement":
		msg = fmt.Sprintf("version %s not converted (hub wrap converts v1beta1 and v1), not emitted", gvk.Version)
	case gvk.Group == fleetPlacementGroup && (gvk.Kind == fleetStrategyKind.Kind || gvk.Kind == fleetRunKind.Kind):
		msg = fmt.Sprintf("version %s not converted (hub wrap converts v1beta1), not emitted", gvk.Version)
	case fleetKindHints[gvk.Kind] != "":
		msg = "kind not converted by hub wrap (" + fleetKindHints[gvk.Kind] + "), not emitted"
	default:
		msg = "kind not converted by hub wrap (it converts ClusterResourcePlacement, ClusterStagedUpdateStrategy and ClusterStagedUpdateRun), not emitted"
	}
	res.Unsupported = append(res.Unsupported, Finding{Object: desc, Message: msg, Source: p.src})
}

// isFleetLabelDomain says whether a label key's prefix is KubeFleet's (or
// Azure Kubernetes Fleet Manager's, where KubeFleet comes from).
func isFleetLabelDomain(prefix string) bool {
	return IsKubeFleetGroup(prefix) || prefix == "fleet.azure.com" || strings.HasSuffix(prefix, ".fleet.azure.com")
}
