package wrap

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// Each OCM testdata file converts into templates of the manifests and a
// policy with the Placement's label selector and the rolloutStrategy;
// exactly the fields that do not map are reported, and the notes say what
// behaves otherwise.
func TestWrapOCMTestdata(t *testing.T) {
	cases := []struct {
		file        string
		kinds       []string
		unsupported []string
		notes       []string // "Object: path" of notes that must be there
		check       func(t *testing.T, objs []runtime.Object)
	}{
		{file: "rollout-progressive.yaml",
			kinds: []string{"ResourceTemplate shop/web-deployment", "ResourceTemplate shop/web-service", "PropagationPolicy shop/web"},
			notes: []string{"Placement shop/prod: spec.clusterSets", "Placement shop/prod: spec.predicates[0].requiredClusterSelector.labelSelector"},
			check: func(t *testing.T, objs []runtime.Object) {
				spec := policySpec(objs[2])
				want := policyv1alpha1.PropagationSpec{
					ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, {APIVersion: "v1", Kind: "Service", Name: "web"}},
					Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "prod"}}}},
					RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive, Progressive: &policyv1alpha1.RolloutProgressive{
						RolloutConfig: policyv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 5 * time.Minute},
							ProgressDeadline: duration(10 * time.Minute), MaxFailures: intOrString("2")},
						MaxConcurrency: intOrString("25%")}},
				}
				if !reflect.DeepEqual(*spec, want) {
					t.Errorf("spec\n%s\nwant\n%s", toJSON(spec), toJSON(want))
				}
			}},
		{file: "rollout-per-group.yaml",
			kinds: []string{"ClusterResourceTemplate payments", "ResourceTemplate payments/payments-config", "ClusterPropagationPolicy payments"},
			notes: []string{
				"ManifestWorkReplicaSet default/payments: spec.placementRefs[0].rolloutStrategy.progressivePerGroup.progressDeadline",
				"ManifestWorkReplicaSet default/payments: spec.placementRefs[0].rolloutStrategy.progressivePerGroup.maxFailures",
				"ManifestWorkReplicaSet default/payments: spec.placementRefs[0].rolloutStrategy.progressivePerGroup.mandatoryDecisionGroups",
				"ManifestWorkReplicaSet default/payments: spec.manifestWorkTemplate.deleteOption.propagationPolicy",
				"Placement default/regions: spec.decisionStrategy.groupStrategy.decisionGroups[1].groupName",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				cpp := objs[2].(*policyv1alpha1.ClusterPropagationPolicy)
				spec := cpp.Spec
				if cpp.Labels["team"] != "payments" || cpp.UID != "" || cpp.ResourceVersion != "" {
					t.Errorf("metadata %+v", cpp.ObjectMeta)
				}
				wantSelectors := []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace", Name: "payments"},
					{APIVersion: "v1", Kind: "ConfigMap", Name: "payments-config", Namespace: "payments"}}
				if !reflect.DeepEqual(spec.ResourceSelectors, wantSelectors) || !ptr.Deref(spec.PreserveResourcesOnDeletion, false) ||
					spec.Placement.ClusterAffinity.LabelSelector.MatchExpressions[0].Key != "environment" {
					t.Errorf("spec %s", toJSON(spec))
				}
				want := &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup, ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
					RolloutConfig: policyv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 2 * time.Minute},
						ProgressDeadline: duration(noProgressDeadline), MaxFailures: intOrString("10%")},
					// The mandatory group first, renamed.
					DecisionGroups: []policyv1alpha1.RolloutGroup{
						{GroupName: "canary-west", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "west", "environment": "canary"}}}},
						{GroupName: "prod-east", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "east"}}}},
					}}}
				if !reflect.DeepEqual(spec.RolloutStrategy, want) {
					t.Errorf("rolloutStrategy\n%s\nwant\n%s", toJSON(spec.RolloutStrategy), toJSON(want))
				}
			}},
		{file: "unsupported.yaml",
			kinds: []string{"ResourceTemplate ops/settings", "PropagationPolicy ops/all-at-once", "ResourceTemplate ops/canary", "PropagationPolicy ops/canary-first"},
			unsupported: []string{
				"ManagedClusterSet global (cluster.open-cluster-management.io/v1beta2)",
				"ManifestWork cluster1/single (work.open-cluster-management.io/v1)",
				"ManifestWorkReplicaSet ops/all-at-once: spec.cascadeDeletionPolicy",
				"ManifestWorkReplicaSet ops/all-at-once: spec.futureField",
				"ManifestWorkReplicaSet ops/all-at-once: spec.manifestWorkTemplate.deleteOption.propagationPolicy",
				"ManifestWorkReplicaSet ops/all-at-once: spec.manifestWorkTemplate.deleteOption.selectivelyOrphans",
				"ManifestWorkReplicaSet ops/all-at-once: spec.manifestWorkTemplate.executor",
				"ManifestWorkReplicaSet ops/all-at-once: spec.manifestWorkTemplate.manifestConfigs",
				"ManifestWorkReplicaSet ops/all-at-once: spec.placementRefs[0].rolloutStrategy.all.progressDeadline",
				"ManifestWorkReplicaSet ops/all-at-once: spec.placementRefs[1]",
				"ManifestWorkReplicaSet ops/canary-first: spec.placementRefs[0].name",
				"ManifestWorkReplicaSet ops/canary-first: spec.placementRefs[0].rolloutStrategy.progressive.mandatoryDecisionGroups",
				"Placement ops/fleet: spec.clusterSets",
				"Placement ops/fleet: spec.numberOfClusters",
				"Placement ops/fleet: spec.predicates[0].requiredClusterSelector.claimSelector",
				"Placement ops/fleet: spec.predicates[1]",
				"Placement ops/fleet: spec.prioritizerPolicy.configurations",
				"Placement ops/fleet: spec.sortBy",
				"Placement ops/fleet: spec.spreadPolicy.spreadConstraints",
				"Placement ops/fleet: spec.tolerations",
				"Placement ops/unused (cluster.open-cluster-management.io/v1beta1)",
			},
			notes: []string{
				"ManifestWorkReplicaSet ops/all-at-once: spec.placementRefs[0].rolloutStrategy.all.minSuccessTime",
				"ManifestWorkReplicaSet ops/canary-first: spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency",
			},
			check: func(t *testing.T, objs []runtime.Object) {
				all := policySpec(objs[1])
				if !reflect.DeepEqual(all.RolloutStrategy, &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeAll}) ||
					all.Placement.ClusterAffinity.LabelSelector.MatchLabels["tier"] != "gold" || all.PreserveResourcesOnDeletion != nil {
					t.Errorf("all-at-once %s", toJSON(all))
				}
				// OCM's default maxConcurrency is every cluster; the
				// Placement is missing, so no affinity.
				canary := policySpec(objs[3])
				if p := canary.RolloutStrategy.Progressive; p.MaxConcurrency.String() != "100%" || canary.Placement.ClusterAffinity != nil {
					t.Errorf("canary-first %s", toJSON(canary))
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			res, objs := convertPeerFile(t, filepath.Join(ocmTestdata, c.file))
			if got := kindsOf(objs); !slices.Equal(got, c.kinds) {
				t.Errorf("output %v, want %v", got, c.kinds)
			}
			if got := findings(res); !slices.Equal(got, c.unsupported) {
				t.Errorf("unsupported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.unsupported, "\n"))
			}
			for _, n := range c.notes {
				if noteAt(res, n) == "" {
					t.Errorf("no note on %s:\n%s", n, strings.Join(res.Notes, "\n"))
				}
			}
			for _, f := range res.Unsupported {
				if !strings.HasPrefix(f.Source, c.file+", document ") || f.Message == "" {
					t.Errorf("finding without its source: %s", f)
				}
			}
			if c.check != nil {
				c.check(t, objs)
			}
		})
	}
}

// ocmDoc is a ManifestWorkReplicaSet with one ConfigMap and the given
// rolloutStrategy, and a Placement with the given spec.
func ocmDoc(rollout, placement string) string {
	doc := `apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: m, namespace: ns}
spec:
  placementRefs:
  - name: p
    rolloutStrategy: ` + rollout + `
  manifestWorkTemplate:
    workload:
      manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}}
`
	if placement != "" {
		doc += "---\napiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: ns}\nspec: " + placement + "\n"
	}
	return doc
}

// Rollout strategies, one field at a time: what Flotilla's rolloutStrategy
// becomes, and which fields are reported.
func TestWrapOCMRollouts(t *testing.T) {
	groups := func(names ...string) string {
		var gs []string
		for _, n := range names {
			gs = append(gs, fmt.Sprintf("{groupName: %s, groupClusterSelector: {labelSelector: {matchLabels: {g: %s}}}}", n, n))
		}
		return "{decisionStrategy: {groupStrategy: {decisionGroups: [" + strings.Join(gs, ", ") + "]}}}"
	}
	var seventeen []string
	for i := range 17 {
		seventeen = append(seventeen, fmt.Sprintf("g%d", i))
	}
	cases := []struct {
		name, rollout, placement string
		want                     string // the rolloutStrategy as JSON
		unsupported              []string
	}{
		{name: "default is All", rollout: "{}", placement: "{}", want: `{"type":"All"}`},
		{name: "All with OCM's default deadline", rollout: "{type: All, all: {progressDeadline: None}}", placement: "{}", want: `{"type":"All"}`},
		{name: "Progressive maxConcurrency 0 is every cluster", rollout: "{type: Progressive, progressive: {maxConcurrency: 0, progressDeadline: 1h}}",
			placement: "{}", want: `{"type":"Progressive","progressive":{"progressDeadline":"1h0m0s","maxConcurrency":"100%"}}`},
		{name: "Progressive maxConcurrency a number", rollout: "{type: Progressive, progressive: {maxConcurrency: 3, progressDeadline: 1h}}",
			placement: "{}", want: `{"type":"Progressive","progressive":{"progressDeadline":"1h0m0s","maxConcurrency":3}}`},
		{name: "Progressive maxConcurrency not a count", rollout: `{type: Progressive, progressive: {maxConcurrency: "150%", progressDeadline: 1h}}`,
			placement: "{}", want: `{"type":"Progressive","progressive":{"progressDeadline":"1h0m0s"}}`,
			unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency"}},
		{name: "bad deadline and failures", rollout: `{type: Progressive, progressive: {maxConcurrency: 1, progressDeadline: 0s, maxFailures: "x%"}}`,
			placement: "{}", want: `{"type":"Progressive","progressive":{"maxConcurrency":1}}`,
			unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy.progressive.maxFailures",
				"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy.progressive.progressDeadline"}},
		{name: "unknown type", rollout: "{type: Canary}", placement: "{}", want: `null`,
			unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy.type"}},
		{name: "ProgressivePerGroup without the Placement", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			want: `null`, unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].name", "ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy"}},
		{name: "ProgressivePerGroup without decision groups", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			placement: "{decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: 3}}}",
			want:      `{"type":"Progressive","progressive":{"progressDeadline":"5m0s","maxConcurrency":3}}`},
		{name: "mandatory group by index", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m, mandatoryDecisionGroups: [{groupIndex: 1}]}}",
			placement: groups("a", "b", "c"),
			want: `{"type":"ProgressivePerGroup","progressivePerGroup":{"progressDeadline":"5m0s","decisionGroups":[` +
				`{"groupName":"b","groupClusterSelector":{"labelSelector":{"matchLabels":{"g":"b"}}}},` +
				`{"groupName":"a","groupClusterSelector":{"labelSelector":{"matchLabels":{"g":"a"}}}},` +
				`{"groupName":"c","groupClusterSelector":{"labelSelector":{"matchLabels":{"g":"c"}}}}]}}`},
		{name: "mandatory group that is not there", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m, mandatoryDecisionGroups: [{groupName: z}]}}",
			placement:   groups("a"),
			want:        `{"type":"ProgressivePerGroup","progressivePerGroup":{"progressDeadline":"5m0s","decisionGroups":[{"groupName":"a","groupClusterSelector":{"labelSelector":{"matchLabels":{"g":"a"}}}}]}}`,
			unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy.progressivePerGroup.mandatoryDecisionGroups[0]"}},
		{name: "clustersPerDecisionGroup splits groups", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			placement:   "{decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: 2, decisionGroups: [{groupName: a, groupClusterSelector: {}}]}}}",
			want:        `{"type":"ProgressivePerGroup","progressivePerGroup":{"progressDeadline":"5m0s","decisionGroups":[{"groupName":"a","groupClusterSelector":{"labelSelector":{}}}]}}`,
			unsupported: []string{"Placement ns/p: spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup"}},
		{name: "at most 16 groups", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			placement: groups(seventeen...), unsupported: []string{"Placement ns/p: spec.decisionStrategy.groupStrategy.decisionGroups[16]"}},
		{name: "groups that do not convert", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			placement: "{decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: remaining}, {groupName: A_b}, {groupName: a.b}, " +
				"{groupName: bad, groupClusterSelector: {labelSelector: {matchExpressions: [{key: k, operator: Near}]}}}]}}}",
			want: `{"type":"ProgressivePerGroup","progressivePerGroup":{"progressDeadline":"5m0s","decisionGroups":[{"groupName":"a-b","groupClusterSelector":{"labelSelector":{}}}]}}`,
			unsupported: []string{"Placement ns/p: spec.decisionStrategy.groupStrategy.decisionGroups[0].groupName",
				"Placement ns/p: spec.decisionStrategy.groupStrategy.decisionGroups[2].groupName",
				"Placement ns/p: spec.decisionStrategy.groupStrategy.decisionGroups[3].groupClusterSelector.labelSelector"}},
		{name: "no group converts", rollout: "{type: ProgressivePerGroup, progressivePerGroup: {progressDeadline: 5m}}",
			placement: "{decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: remaining}]}}}", want: `null`,
			unsupported: []string{"ManifestWorkReplicaSet ns/m: spec.placementRefs[0].rolloutStrategy",
				"Placement ns/p: spec.decisionStrategy.groupStrategy.decisionGroups[0].groupName"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, objs := convertPeerDoc(t, "in", ocmDoc(c.rollout, c.placement))
			spec := policySpec(objs[len(objs)-1])
			if c.want != "" {
				// The typed value writes the zero minSuccessTime the output omits.
				if got := strings.ReplaceAll(toJSON(spec.RolloutStrategy), `"minSuccessTime":"0s",`, ""); got != c.want {
					t.Errorf("rolloutStrategy\n%s\nwant\n%s", got, c.want)
				}
			}
			want := slices.Clone(c.unsupported)
			slices.Sort(want)
			if got := findings(res); !slices.Equal(got, want) {
				t.Errorf("unsupported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if c.name == "at most 16 groups" && len(spec.RolloutStrategy.ProgressivePerGroup.DecisionGroups) != 16 {
				t.Errorf("%d groups", len(spec.RolloutStrategy.ProgressivePerGroup.DecisionGroups))
			}
		})
	}
}

// A ManifestWorkReplicaSet with no manifest or no placement emits no
// policy (one without placement would select every cluster, where OCM
// selects none); more manifests than a policy's selectors are reported.
func TestWrapOCMNoPolicy(t *testing.T) {
	noManifests := "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m}\nspec: {placementRefs: [{name: p}]}\n"
	res, objs := convertPeerDoc(t, "in", noManifests)
	if len(objs) != 0 || !slices.Equal(findings(res), []string{"ManifestWorkReplicaSet default/m: spec.manifestWorkTemplate.workload.manifests"}) {
		t.Errorf("objects %v, findings %v", kindsOf(objs), findings(res))
	}
	noPlacement := "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m}\n" +
		"spec: {manifestWorkTemplate: {workload: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}}}\n"
	res, objs = convertPeerDoc(t, "in", noPlacement)
	if got := kindsOf(objs); !slices.Equal(got, []string{"ResourceTemplate default/c"}) ||
		!slices.Equal(findings(res), []string{"ManifestWorkReplicaSet default/m: spec.placementRefs"}) {
		t.Errorf("objects %v, findings %v", got, findings(res))
	}

	var manifests []string
	for i := range maxResourceSelectors + 2 {
		manifests = append(manifests, fmt.Sprintf("{apiVersion: v1, kind: ConfigMap, metadata: {name: c%d}}", i))
	}
	many := "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m}\n" +
		"spec: {placementRefs: [{name: p}], manifestWorkTemplate: {workload: {manifests: [" + strings.Join(manifests, ", ") + "]}}}\n" +
		"---\napiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p}\n"
	res, objs = convertPeerDoc(t, "in", many)
	if n := len(policySpec(objs[len(objs)-1]).ResourceSelectors); n != maxResourceSelectors {
		t.Errorf("%d selectors", n)
	}
	if got := findings(res); len(got) != 1 || !strings.HasSuffix(got[0], fmt.Sprintf("manifests[%d]", maxResourceSelectors)) {
		t.Errorf("findings %v", got)
	}
}
