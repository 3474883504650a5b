package wrap

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// Each KubeFleet testdata file converts into a ClusterPropagationPolicy per
// ClusterResourcePlacement: RollingUpdate into a Progressive rollout,
// External into ProgressivePerGroup with a decision group per stage of its
// ClusterStagedUpdateStrategy; exactly the fields that do not map are
// reported, and the notes say what behaves otherwise.
func TestWrapKubeFleetTestdata(t *testing.T) {
	one := intstr.FromInt32(1)
	two := intstr.FromInt32(2)
	cases := []struct {
		file        string
		kinds       []string
		unsupported []string
		notes       []string
		check       func(t *testing.T, objs []runtime.Object)
	}{
		{file: "rolling-update.yaml",
			kinds: []string{"ClusterPropagationPolicy web", "ClusterResourceTemplate web", "ResourceTemplate web/web",
				"ResourceTemplate web/web-config", "ClusterResourceTemplate web-reader"},
			notes: []string{
				"ClusterResourcePlacement web: spec.resourceSelectors[0]",
				"ClusterResourcePlacement web: spec.strategy.rollingUpdate.unavailablePeriodSeconds",
				"ClusterResourcePlacement web: spec.strategy",
				"ClusterResourcePlacement web: spec.revisionHistoryLimit",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				spec := policySpec(objs[0])
				want := policyv1alpha1.PropagationSpec{
					// The Namespace, the kinds the input holds in it, the
					// ClusterRole.
					ResourceSelectors: []policyv1alpha1.ResourceSelector{
						{APIVersion: "v1", Kind: "Namespace", Name: "web"},
						{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web"},
						{APIVersion: "v1", Kind: "ConfigMap", Namespace: "web"},
						{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "web-reader"},
					},
					Placement:          policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: matchLabels("environment", "prod")}},
					ConflictResolution: policyv1alpha1.ConflictAbort,
					ApplyStrategy:      policyv1alpha1.ApplyStrategyServerSideApply,
					RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive,
						Progressive: &policyv1alpha1.RolloutProgressive{
							RolloutConfig:  policyv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 2 * time.Minute}},
							MaxConcurrency: &two},
						RevisionHistoryLimit: ptr.To[int32](5)},
				}
				if !reflect.DeepEqual(*spec, want) {
					t.Errorf("spec\n%s\nwant\n%s", toJSON(spec), toJSON(want))
				}
			}},
		{file: "staged.yaml",
			kinds: []string{"ClusterPropagationPolicy checkout"},
			notes: []string{
				"ClusterResourcePlacement checkout: spec.strategy.type",
				"ClusterResourcePlacement checkout: spec.strategy.applyStrategy.whenToTakeOver",
				"ClusterStagedUpdateStrategy three-stages: spec.stages[0].afterStageTasks[0]",
				"ClusterStagedUpdateStrategy three-stages: spec.stages[1].afterStageTasks[0]",
				"ClusterStagedUpdateStrategy three-stages: spec.stages[2].beforeStageTasks[0]",
				"ClusterStagedUpdateStrategy three-stages: spec.stages",
				"ClusterStagedUpdateStrategy three-stages",
				"ClusterStagedUpdateRun checkout-v2",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				spec := policySpec(objs[0])
				if !slices.Equal(spec.Placement.ClusterAffinity.ClusterNames, []string{"staging-1", "canary-1", "prod-1", "prod-2", "prod-3"}) ||
					spec.ConflictResolution != policyv1alpha1.ConflictOverwrite ||
					!reflect.DeepEqual(spec.ResourceSelectors, []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace", Name: "checkout"}}) {
					t.Errorf("spec %s", toJSON(spec))
				}
				want := &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup, ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
					// The longest wait, for every cluster.
					RolloutConfig: policyv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 30 * time.Minute}},
					DecisionGroups: []policyv1alpha1.RolloutGroup{
						{GroupName: "staging", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: matchLabels("environment", "staging")}, MaxConcurrency: &one},
						// production's approval before it is canary's after it.
						{GroupName: "canary", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: matchLabels("environment", "canary")}, MaxConcurrency: &one,
							Approval: policyv1alpha1.ApprovalRequired},
						{GroupName: "production", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: matchLabels("environment", "prod")}, MaxConcurrency: &two},
					}}}
				if !reflect.DeepEqual(spec.RolloutStrategy, want) {
					t.Errorf("rolloutStrategy\n%s\nwant\n%s", toJSON(spec.RolloutStrategy), toJSON(want))
				}
			}},
		{file: "examples.yaml",
			kinds: []string{"ClusterPropagationPolicy example-placement", "ClusterPropagationPolicy afd-crp"},
			unsupported: []string{
				"ClusterApprovalRequest example-run-canary (placement.kubernetes-fleet.io/v1beta1)",
				"ClusterResourcePlacement afd-crp: spec.strategy.rollingUpdate.maxSurge",
				"ClusterStagedUpdateStrategy example-strategy: spec.stages[1].sortingLabelKey",
				"ClusterStagedUpdateStrategy example-strategy: spec.stages[2].sortingLabelKey",
			},
			notes: []string{
				"ClusterResourcePlacement example-placement: spec.policy.tolerations",
				"ClusterResourcePlacement example-placement: spec.resourceSelectors[0]",
				"ClusterStagedUpdateStrategy example-strategy: spec.stages[2].afterStageTasks[1]",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				spec := policySpec(objs[0])
				if tol := spec.Placement.ClusterTolerations; !reflect.DeepEqual(tol, []corev1.Toleration{{Key: "gpu-workload", Operator: corev1.TolerationOpExists}}) {
					t.Errorf("tolerations %+v", tol)
				}
				pg := spec.RolloutStrategy.ProgressivePerGroup
				var names []string
				for _, g := range pg.DecisionGroups {
					names = append(names, fmt.Sprintf("%s/%s", g.GroupName, g.Approval))
				}
				if !slices.Equal(names, []string{"staging/", "canary/Required", "production/Required"}) || pg.MinSuccessTime.Duration != time.Hour {
					t.Errorf("groups %v, minSuccessTime %v", names, pg.MinSuccessTime)
				}
				p := policySpec(objs[1]).RolloutStrategy.Progressive
				if p.MaxConcurrency.String() != "2" || p.MinSuccessTime.Duration != time.Minute {
					t.Errorf("afd-crp %s", toJSON(p))
				}
			}},
		{file: "unsupported.yaml",
			kinds: []string{"ClusterPropagationPolicy picky", "ClusterPropagationPolicy undecided", "ClusterPropagationPolicy odd", "ClusterResourceTemplate payments"},
			unsupported: []string{
				"ClusterResourceOverride override (placement.kubernetes-fleet.io/v1beta1)",
				"ClusterResourcePlacement picky: spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution",
				"ClusterResourcePlacement picky: spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector",
				"ClusterResourcePlacement picky: spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[1]",
				"ClusterResourcePlacement picky: spec.policy.topologySpreadConstraints",
				"ClusterResourcePlacement picky: spec.resourceSelectors[0]",
				"ClusterResourcePlacement picky: spec.revisionHistoryLimit",
				"ClusterResourcePlacement picky: spec.statusReportingScope",
				"ClusterResourcePlacement picky: spec.strategy.applyStrategy.allowCoOwnership",
				"ClusterResourcePlacement picky: spec.strategy.applyStrategy.comparisonOption",
				"ClusterResourcePlacement picky: spec.strategy.applyStrategy.type",
				"ClusterResourcePlacement picky: spec.strategy.applyStrategy.whenToTakeOver",
				"ClusterResourcePlacement picky: spec.strategy.reportBackStrategy",
				"ClusterResourcePlacement picky: spec.strategy.rollingUpdate.maxSurge",
				"ClusterResourcePlacement picky: spec.strategy.rollingUpdate.maxUnavailable",
				"ClusterResourcePlacement undecided: spec.strategy.type",
				"ClusterStagedUpdateStrategy first: spec.stages[0].labelSelector",
				"ClusterStagedUpdateStrategy first: spec.stages[1].beforeStageTasks[0]",
				"ClusterStagedUpdateStrategy second (placement.kubernetes-fleet.io/v1beta1)",
				"MemberCluster member-1 (cluster.kubernetes-fleet.io/v1beta1)",
			},
			notes: []string{
				"ClusterResourcePlacement picky: spec.policy.numberOfClusters",
				"ClusterResourcePlacement picky: spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].labelSelector: label fleet.azure.com/location",
				"ClusterResourcePlacement undecided: spec.resourceSelectors[0]",
				"ClusterStagedUpdateStrategy first: spec.stages[1].name",
				"ClusterStagedUpdateStrategy first: spec.stages[2].name",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				picky := policySpec(objs[0])
				if !reflect.DeepEqual(picky.Placement.SpreadConstraints, []policyv1alpha1.SpreadConstraint{{SpreadByField: "cluster", MaxGroups: 2, MinGroups: 1}}) ||
					!reflect.DeepEqual(picky.ResourceSelectors, []policyv1alpha1.ResourceSelector{{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition",
						LabelSelector: matchLabels("app", "web")}}) ||
					picky.RolloutStrategy.Progressive.MaxConcurrency != nil || picky.RolloutStrategy.RevisionHistoryLimit != nil ||
					picky.ApplyStrategy != "" || picky.ConflictResolution != policyv1alpha1.ConflictAbort {
					t.Errorf("picky %s", toJSON(picky))
				}
				if undecided := policySpec(objs[1]); undecided.RolloutStrategy != nil {
					t.Errorf("undecided %s", toJSON(undecided))
				}
				var names []string
				for _, g := range policySpec(objs[2]).RolloutStrategy.ProgressivePerGroup.DecisionGroups {
					names = append(names, g.GroupName)
				}
				if !slices.Equal(names, []string{"remaining-stage", "late-stage"}) {
					t.Errorf("odd's groups %v", names)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			res, objs := convertPeerFile(t, filepath.Join(fleetTestdata, c.file))
			if got := kindsOf(objs); !slices.Equal(got, c.kinds) {
				t.Errorf("output %v, want %v", got, c.kinds)
			}
			want := slices.Clone(c.unsupported)
			slices.Sort(want)
			if got := findings(res); !slices.Equal(got, want) {
				t.Errorf("unsupported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, n := range c.notes {
				if noteAt(res, n) == "" && !slices.ContainsFunc(res.Notes, func(s string) bool { return strings.HasPrefix(s, n) }) {
					t.Errorf("no note on %s:\n%s", n, strings.Join(res.Notes, "\n"))
				}
			}
			for _, f := range res.Unsupported {
				if !strings.HasPrefix(f.Source, c.file+", document ") || f.Message == "" {
					t.Errorf("finding without its source or reason: %s", f)
				}
			}
			if c.check != nil {
				c.check(t, objs)
			}
		})
	}
}

// crpDoc is a ClusterResourcePlacement of a ClusterRole with the given
// strategy and policy.
func crpDoc(strategy, policy string) string {
	doc := "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: c}\nspec:\n" +
		"  resourceSelectors: [{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r}]\n"
	if strategy != "" {
		doc += "  strategy: " + strategy + "\n"
	}
	if policy != "" {
		doc += "  policy: " + policy + "\n"
	}
	return doc
}

// Rolling updates and placements, one field at a time.
func TestWrapKubeFleetRollingUpdate(t *testing.T) {
	cases := []struct {
		name, strategy, policy string
		want                   string // the rolloutStrategy as JSON
		unsupported            []string
		noPolicy               bool
	}{
		{name: "defaults", want: `{"type":"Progressive","progressive":{"minSuccessTime":"1m0s","maxConcurrency":"25%"}}`},
		{name: "a percentage", strategy: `{rollingUpdate: {maxUnavailable: "50%", unavailablePeriodSeconds: 0}}`,
			want: `{"type":"Progressive","progressive":{"minSuccessTime":"0s","maxConcurrency":"50%"}}`},
		{name: "not a count", strategy: `{rollingUpdate: {maxUnavailable: "many"}}`,
			want:        `{"type":"Progressive","progressive":{"minSuccessTime":"1m0s"}}`,
			unsupported: []string{"ClusterResourcePlacement c: spec.strategy.rollingUpdate.maxUnavailable"}},
		{name: "negative wait", strategy: `{rollingUpdate: {maxUnavailable: 1, unavailablePeriodSeconds: -5}}`,
			want:        `{"type":"Progressive","progressive":{"minSuccessTime":"0s","maxConcurrency":1}}`,
			unsupported: []string{"ClusterResourcePlacement c: spec.strategy.rollingUpdate.unavailablePeriodSeconds"}},
		{name: "unknown type", strategy: `{type: Canary}`, want: `null`, unsupported: []string{"ClusterResourcePlacement c: spec.strategy.type"}},
		{name: "External without a strategy", strategy: `{type: External}`, want: `null`, unsupported: []string{"ClusterResourcePlacement c: spec.strategy.type"}},
		{name: "PickFixed without names", policy: `{placementType: PickFixed}`, noPolicy: true,
			unsupported: []string{"ClusterResourcePlacement c: spec.policy.clusterNames"}},
		{name: "PickN of none", policy: `{placementType: PickN, numberOfClusters: 0}`, noPolicy: true,
			unsupported: []string{"ClusterResourcePlacement c: spec.policy.numberOfClusters"}},
		{name: "unknown placement type", policy: `{placementType: PickSome}`, noPolicy: true,
			unsupported: []string{"ClusterResourcePlacement c: spec.policy.placementType"}},
		{name: "bad tolerations", policy: `{tolerations: [{key: a, operator: Near}, {key: b, effect: NoExecute}, {key: c, operator: Equal, value: v}]}`,
			want: `{"type":"Progressive","progressive":{"minSuccessTime":"1m0s","maxConcurrency":"25%"}}`,
			unsupported: []string{"ClusterResourcePlacement c: spec.policy.tolerations[0].operator",
				"ClusterResourcePlacement c: spec.policy.tolerations[1].effect"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, objs := convertPeerDoc(t, "in", crpDoc(c.strategy, c.policy))
			want := slices.Clone(c.unsupported)
			slices.Sort(want)
			if got := findings(res); !slices.Equal(got, want) {
				t.Errorf("unsupported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if c.noPolicy {
				if len(objs) != 0 {
					t.Errorf("output %v", kindsOf(objs))
				}
				return
			}
			spec := policySpec(objs[0])
			if got := toJSON(spec.RolloutStrategy); got != c.want {
				t.Errorf("rolloutStrategy\n%s\nwant\n%s", got, c.want)
			}
			if c.name == "bad tolerations" && (len(spec.Placement.ClusterTolerations) != 1 || spec.Placement.ClusterTolerations[0].Key != "c") {
				t.Errorf("tolerations %+v", spec.Placement.ClusterTolerations)
			}
		})
	}
}

// A Namespace selected with NamespaceWithResourceSelectors takes the other
// selectors' namespaced kinds from it; more than 16 stages are reported.
func TestWrapKubeFleetSelectorsAndStages(t *testing.T) {
	const within = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: c}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: app, selectionScope: NamespaceWithResourceSelectors}
  - {group: apps, version: v1, kind: Deployment, labelSelector: {matchLabels: {tier: frontend}}}
  - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: app-admin}
  - {group: "", version: v1, kind: Namespace, name: other, selectionScope: Everything}
`
	res, objs := convertPeerDoc(t, "in", within)
	want := []policyv1alpha1.ResourceSelector{
		{APIVersion: "v1", Kind: "Namespace", Name: "app"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", LabelSelector: matchLabels("tier", "frontend")},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "app-admin"},
		{APIVersion: "v1", Kind: "Namespace", Name: "other"},
	}
	if got := policySpec(objs[0]).ResourceSelectors; !reflect.DeepEqual(got, want) {
		t.Errorf("selectors %s", toJSON(got))
	}
	if got := findings(res); !slices.Equal(got, []string{"ClusterResourcePlacement c: spec.resourceSelectors[3].selectionScope"}) {
		t.Errorf("findings %v", got)
	}

	var stages []string
	for i := range 18 {
		stages = append(stages, fmt.Sprintf("{name: s%d, labelSelector: {matchLabels: {wave: %q}}}", i, fmt.Sprint(i)))
	}
	staged := crpDoc("{type: External}", "") + "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\n" +
		"metadata: {name: s}\nspec: {stages: [" + strings.Join(stages, ", ") + "]}\n"
	res, objs = convertPeerDoc(t, "in", staged)
	if n := len(policySpec(objs[0]).RolloutStrategy.ProgressivePerGroup.DecisionGroups); n != maxDecisionGroups {
		t.Errorf("%d groups", n)
	}
	if got := findings(res); !slices.Equal(got, []string{"ClusterStagedUpdateStrategy s: spec.stages[16]", "ClusterStagedUpdateStrategy s: spec.stages[17]"}) {
		t.Errorf("findings %v", got)
	}
	if n := noteAt(res, "ClusterResourcePlacement c: spec.strategy.type"); !strings.Contains(n, "the input's only ClusterStagedUpdateStrategy, s") {
		t.Errorf("notes %v", res.Notes)
	}
}
