package wrap

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

const karmadaTestdata = "testdata/karmada"

// convertFile wraps one testdata file with --from-karmada and returns the
// result and its output decoded strictly as Flotilla objects.
func convertFile(t *testing.T, name string, opts Options) (*Result, []runtime.Object) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(karmadaTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	opts.FromKarmada = true
	res, err := Wrap([]Input{{Name: name, Data: data}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return res, decodeStream(t, out)
}

func paths(res *Result) []string {
	var out []string
	for _, f := range res.Unsupported {
		if f.Path != "" {
			out = append(out, f.Path)
		}
	}
	sort.Strings(out)
	return out
}

// Every reconstructed seed converts into Flotilla objects that decode
// strictly; the fields Flotilla has are kept with their values, and exactly
// the fields it lacks are reported.
func TestKarmadaSeeds(t *testing.T) {
	weighted := &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 2},
		}}}
	nginxSelector := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}}
	twoSelectors := append(nginxSelector, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "mysql"})
	m1m2 := &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}

	cases := []struct {
		file        string
		kinds       []string // "Kind namespace/name" of the output, in order
		unsupported []string
		check       func(t *testing.T, objs []runtime.Object)
	}{
		{file: "000-divided-weighted.yaml",
			kinds: []string{"ResourceTemplate seeds/nginx", "PropagationPolicy seeds/nginx-propagation"},
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[1].(*policyv1alpha1.PropagationPolicy)
				want := policyv1alpha1.PropagationSpec{ResourceSelectors: nginxSelector,
					Placement: policyv1alpha1.Placement{ClusterAffinity: m1m2, ReplicaScheduling: weighted}}
				if !reflect.DeepEqual(pp.Spec, want) {
					t.Errorf("spec %+v", pp.Spec)
				}
			}},
		{file: "001-divided.yaml",
			kinds: []string{"ResourceTemplate seeds/nginx", "PropagationPolicy seeds/nginx-propagation"},
			check: func(t *testing.T, objs []runtime.Object) {
				if rs := objs[1].(*policyv1alpha1.PropagationPolicy).Spec.Placement.ReplicaScheduling; !reflect.DeepEqual(rs, weighted) {
					t.Errorf("replicaScheduling %+v", rs)
				}
			}},
		{file: "001-duplicated.yaml",
			kinds: []string{"ResourceTemplate seeds/nginx", "PropagationPolicy seeds/nginx-propagation"},
			check: func(t *testing.T, objs []runtime.Object) {
				p := objs[1].(*policyv1alpha1.PropagationPolicy).Spec.Placement
				if p.ReplicaScheduling.ReplicaSchedulingType != policyv1alpha1.ReplicaSchedulingTypeDuplicated ||
					!reflect.DeepEqual(p.SpreadConstraints, []policyv1alpha1.SpreadConstraint{{MaxGroups: 2, MinGroups: 2}}) ||
					!reflect.DeepEqual(p.ClusterAffinity.ClusterNames, []string{"member1", "member2", "member3", "member5"}) {
					t.Errorf("placement %+v", p)
				}
			}},
		{file: "001-default-tolerations.yaml",
			kinds:       []string{"PropagationPolicy default/nginx-propagation"},
			unsupported: []string{"spec.clusterTolerations"},
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[0].(*policyv1alpha1.PropagationPolicy)
				want := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", Namespace: "default"}}
				if !reflect.DeepEqual(pp.Spec.ResourceSelectors, want) || pp.Spec.Placement.ClusterTolerations != nil {
					t.Errorf("spec %+v", pp.Spec)
				}
			}},
		{file: "001-default-tolerations-placement.yaml",
			kinds: []string{"PropagationPolicy default/nginx-propagation"},
			check: func(t *testing.T, objs []runtime.Object) {
				tols := objs[0].(*policyv1alpha1.PropagationPolicy).Spec.Placement.ClusterTolerations
				if len(tols) != 2 || tols[0].Key != clusterv1alpha1.TaintClusterNotReady || tols[1].Key != clusterv1alpha1.TaintClusterUnreachable ||
					*tols[0].TolerationSeconds != 600 || tols[1].Effect != "NoExecute" || tols[1].Operator != "Exists" {
					t.Errorf("tolerations %+v", tols)
				}
			}},
		{file: "002-application-failover.yaml",
			kinds: []string{"PropagationPolicy seeds/nginx-propagation"},
			// preConditions converts (issue 18); healthyState [Unhealthy]
			// is what Flotilla does and goes with a note.
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[0].(*policyv1alpha1.PropagationPolicy)
				if !reflect.DeepEqual(pp.Spec.ResourceSelectors, twoSelectors) || !reflect.DeepEqual(pp.Spec.Placement.ClusterAffinity, m1m2) ||
					pp.Spec.Failover == nil || *pp.Spec.Failover.Application.DecisionConditions.TolerationSeconds != 200 {
					t.Errorf("spec %+v", pp.Spec)
				}
				if pc := pp.Spec.Failover.Application.PreConditions; pc == nil || pc.DelaySeconds == nil || *pc.DelaySeconds != 5000 || pc.HealthyState != "" {
					t.Errorf("preConditions %+v", pc)
				}
			}},
		{file: "002-failover-per-kind.yaml",
			kinds:       []string{"PropagationPolicy seeds/nginx-propagation"},
			unsupported: []string{"spec.failover"},
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[0].(*policyv1alpha1.PropagationPolicy)
				if !reflect.DeepEqual(pp.Spec.ResourceSelectors, twoSelectors) || pp.Spec.Failover != nil ||
					!reflect.DeepEqual(pp.Spec.Placement.ClusterAffinity, m1m2) {
					t.Errorf("spec %+v", pp.Spec)
				}
			}},
		{file: "003-template-propagation-override.yaml",
			kinds: []string{"ResourceTemplate default/nginx", "PropagationPolicy default/nginx-propagation",
				"OverridePolicy default/nginx-override"},
			check: func(t *testing.T, objs []runtime.Object) {
				if do := objs[1].(*policyv1alpha1.PropagationPolicy).Spec.DependentOverrides; !reflect.DeepEqual(do, []string{"nginx-override"}) {
					t.Errorf("dependentOverrides %v", do)
				}
				op := objs[2].(*policyv1alpha1.OverridePolicy)
				if len(op.Spec.OverrideRules) != 1 || !reflect.DeepEqual(op.Spec.OverrideRules[0].TargetCluster.ClusterNames, []string{"member2"}) {
					t.Fatalf("override rules %+v", op.Spec.OverrideRules)
				}
				pt := op.Spec.OverrideRules[0].Overriders.Plaintext
				if len(pt) != 1 || pt[0].Path != "/spec/replicas" || pt[0].Operator != "replace" || string(pt[0].Value.Raw) != "2" {
					t.Errorf("plaintext %+v", pt)
				}
			}},
		{file: "003-claimed-template.yaml",
			kinds: []string{"ResourceTemplate default/nginx"},
			check: func(t *testing.T, objs []runtime.Object) {
				raw := string(objs[0].(*workv1alpha1.ResourceTemplate).Spec.Manifest.Raw)
				if strings.Contains(raw, "karmada.io") || !strings.Contains(raw, `"propagationpolicy.flotilla.io/name":"nginx-propagation"`) {
					t.Errorf("manifest %s", raw)
				}
			}},
		{file: "004-remedy.yaml",
			kinds: []string{"Remedy foo"},
			check: func(t *testing.T, objs []runtime.Object) {
				want := remedyv1alpha1.RemedySpec{
					ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
					DecisionMatches: []remedyv1alpha1.DecisionMatch{{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
						ConditionType: remedyv1alpha1.ServiceDomainNameResolutionReady, Operator: remedyv1alpha1.ClusterConditionEqual, ConditionStatus: "False"}}},
					Actions: []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}
				if r := objs[0].(*remedyv1alpha1.Remedy); !reflect.DeepEqual(r.Spec, want) {
					t.Errorf("spec %+v", r.Spec)
				}
			}},
		{file: "004-remedy-upgrade.yaml",
			kinds: []string{"Remedy foo"},
			check: func(t *testing.T, objs []runtime.Object) {
				if r := objs[0].(*remedyv1alpha1.Remedy); r.Spec.DecisionMatches != nil || r.Spec.ClusterAffinity.ClusterNames[0] != "member1" {
					t.Errorf("spec %+v", r.Spec)
				}
			}},
		{file: "issue31-preemption.yaml",
			kinds: []string{"PropagationPolicy default/nginx-high", "ClusterPropagationPolicy web-tier", "PropagationPolicy default/nginx-low"},
			check: func(t *testing.T, objs []runtime.Object) {
				if p := objs[0].(*policyv1alpha1.PropagationPolicy).Spec; p.Preemption != policyv1alpha1.PreemptAlways || *p.Priority != 10 {
					t.Errorf("nginx-high: preemption %q priority %d, want Always 10", p.Preemption, *p.Priority)
				}
				if p := objs[1].(*policyv1alpha1.ClusterPropagationPolicy).Spec; p.Preemption != policyv1alpha1.PreemptAlways {
					t.Errorf("web-tier: preemption %q, want Always", p.Preemption)
				}
				if p := objs[2].(*policyv1alpha1.PropagationPolicy).Spec; p.Preemption != policyv1alpha1.PreemptNever {
					t.Errorf("nginx-low: preemption %q, want Never", p.Preemption)
				}
			}},
		{file: "issue39-schedule-priority.yaml",
			kinds: []string{"PropagationPolicy default/critical-app-policy", "ClusterPropagationPolicy critical-cluster-policy",
				"PropagationPolicy default/pod-priority-policy"},
			unsupported: []string{"spec.schedulePriority"},
			check: func(t *testing.T, objs []runtime.Object) {
				want := &policyv1alpha1.SchedulePriority{PriorityClassSource: policyv1alpha1.KubePriorityClass, PriorityClassName: "high-priority-example"}
				if sp := objs[0].(*policyv1alpha1.PropagationPolicy).Spec.SchedulePriority; !reflect.DeepEqual(sp, want) {
					t.Errorf("critical-app-policy: schedulePriority %+v, want %+v", sp, want)
				}
				if sp := objs[1].(*policyv1alpha1.ClusterPropagationPolicy).Spec.SchedulePriority; !reflect.DeepEqual(sp, want) {
					t.Errorf("critical-cluster-policy: schedulePriority %+v, want %+v", sp, want)
				}
				if sp := objs[2].(*policyv1alpha1.PropagationPolicy).Spec.SchedulePriority; sp != nil {
					t.Errorf("pod-priority-policy: schedulePriority %+v kept, want it dropped", sp)
				}
			}},
		{file: "unsupported.yaml",
			kinds: []string{"PropagationPolicy default/nginx", "OverridePolicy default/nginx"},
			unsupported: []string{"spec.activationPreference", "spec.failover.application.statePreservation.rules[1]",
				"spec.healthInterpretation",
				"spec.placement.replicaScheduling.foo", "spec.placement.spreadConstraints[0].foo",
				"spec.schedulerName"},
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[0].(*policyv1alpha1.PropagationPolicy)
				a := pp.Spec.Failover.Application
				if *a.DecisionConditions.TolerationSeconds != 120 || a.PurgeMode != "Gracefully" || *a.GracePeriodSeconds != 600 ||
					pp.Spec.Placement.SpreadConstraints[0].SpreadByField != "cluster" || pp.Spec.Placement.ReplicaScheduling.ReplicaDivisionPreference != "Weighted" {
					t.Errorf("kept fields lost: %+v", pp.Spec)
				}
				// The rule without braces goes; the other stays.
				if sp := a.StatePreservation; sp == nil || !reflect.DeepEqual(sp.Rules, []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: "application.karmada.io/replicas", JSONPath: "{ .replicas }"}}) {
					t.Errorf("statePreservation %+v", sp)
				}
				op := objs[1].(*policyv1alpha1.OverridePolicy)
				if img := op.Spec.OverrideRules[0].Overriders.ImageOverrider; len(img) != 1 || img[0].Value != "registry.example.com" {
					t.Errorf("imageOverrider lost: %+v", op.Spec.OverrideRules)
				}
			}},
		{file: "issue18-stateful-failover.yaml",
			kinds: []string{"ResourceTemplate streaming/fraud-detector", "PropagationPolicy streaming/fraud-detector"},
			check: func(t *testing.T, objs []runtime.Object) {
				f := objs[1].(*policyv1alpha1.PropagationPolicy).Spec.Failover
				want := &policyv1alpha1.FailoverBehavior{
					Application: &policyv1alpha1.ApplicationFailoverBehavior{
						DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](60)},
						PurgeMode:          policyv1alpha1.PurgeModeDirectly,
						StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
							{AliasLabelName: "flink.example.io/checkpoint-path", JSONPath: "{ .jobStatus.checkpointPath }"},
							{AliasLabelName: "application.karmada.io/failover-jobid", JSONPath: "{.jobStatus.jobId}"}}}},
					Cluster: &policyv1alpha1.ClusterFailoverBehavior{
						PurgeMode: policyv1alpha1.PurgeModeDirectly,
						StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
							{AliasLabelName: "flink.example.io/checkpoint-path", JSONPath: "{.jobStatus.checkpointPath}"}}}},
				}
				if !reflect.DeepEqual(f, want) {
					t.Errorf("failover %s", toJSON(f))
				}
				if raw := string(objs[0].(*workv1alpha1.ResourceTemplate).Spec.Manifest.Raw); strings.Contains(raw, "checkpoints/fraud") {
					t.Errorf("the source's status was kept: %s", raw)
				}
			}},
		{file: "issue18-karmada-v1.12.yaml",
			kinds: []string{"ClusterPropagationPolicy flink-jobs", "PropagationPolicy shop/checkout"},
			check: func(t *testing.T, objs []runtime.Object) {
				cpp := objs[0].(*policyv1alpha1.ClusterPropagationPolicy).Spec
				a := cpp.Failover.Application
				if !cpp.PropagateDeps || cpp.ConflictResolution != policyv1alpha1.ConflictOverwrite ||
					a.PurgeMode != policyv1alpha1.PurgeModeDirectly || cpp.Failover.Cluster.PurgeMode != policyv1alpha1.PurgeModeGracefully ||
					a.BlockPredecessorSeconds == nil || *a.BlockPredecessorSeconds != 0 ||
					!reflect.DeepEqual(a.PreConditions, &policyv1alpha1.PreConditions{DelaySeconds: ptr.To[int32](120), HealthyState: policyv1alpha1.HealthyStateHealthy}) ||
					len(a.StatePreservation.Rules) != 1 {
					t.Errorf("ClusterPropagationPolicy %s", toJSON(cpp))
				}
				pa := objs[1].(*policyv1alpha1.PropagationPolicy).Spec.Failover.Application
				if pa.PurgeMode != policyv1alpha1.PurgeModeGracefully || *pa.GracePeriodSeconds != 300 || *pa.BlockPredecessorSeconds != 600 {
					t.Errorf("PropagationPolicy failover %s", toJSON(pa))
				}
			}},
		{file: "issue18-propagate-deps.yaml",
			kinds: []string{"ResourceTemplate shop/web-deployment", "ResourceTemplate shop/web-config", "ResourceTemplate shop/web-serviceaccount",
				"ResourceTemplate shop/web-data", "PropagationPolicy shop/web", "OverridePolicy shop/web-images"},
			check: func(t *testing.T, objs []runtime.Object) {
				pp := objs[4].(*policyv1alpha1.PropagationPolicy).Spec
				if !pp.PropagateDeps || !reflect.DeepEqual(pp.DependentOverrides, []string{"web-images"}) || pp.ConflictResolution != policyv1alpha1.ConflictOverwrite {
					t.Errorf("PropagationPolicy %s", toJSON(pp))
				}
			}},
		{file: "issue18-workloadrebalancer.yaml",
			kinds: []string{"WorkloadRebalancer demo"},
			check: func(t *testing.T, objs []runtime.Object) {
				wr := objs[0].(*appsv1alpha1.WorkloadRebalancer)
				want := appsv1alpha1.WorkloadRebalancerSpec{
					Workloads: []appsv1alpha1.ObjectReference{
						{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "demo-deploy-1"},
						{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "demo-deploy-2"},
						{APIVersion: "v1", Kind: "ConfigMap", Name: "demo-config"}},
					TTLSecondsAfterFinished: ptr.To[int32](60)}
				if !reflect.DeepEqual(wr.Spec, want) || !reflect.DeepEqual(wr.Status, appsv1alpha1.WorkloadRebalancerStatus{}) ||
					wr.UID != "" || wr.ResourceVersion != "" || wr.Namespace != "" {
					t.Errorf("WorkloadRebalancer %s", toJSON(wr))
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			res, objs := convertFile(t, c.file, Options{Namespace: "seeds"})
			var kinds []string
			for _, o := range res.Objects {
				kinds = append(kinds, o.GetKind()+" "+describeName(o.GetNamespace(), o.GetName()))
				if strings.Contains(o.GetAPIVersion(), "karmada") {
					t.Errorf("%s still in a Karmada group", o.GetAPIVersion())
				}
			}
			if !reflect.DeepEqual(kinds, c.kinds) {
				t.Errorf("output %v, want %v", kinds, c.kinds)
			}
			want := append([]string(nil), c.unsupported...)
			sort.Strings(want)
			if got := paths(res); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("unsupported fields %v, want %v", got, want)
			}
			if c.check != nil {
				c.check(t, objs)
			}
		})
	}
}

// Karmada kinds without a Flotilla equivalent are reported and left out;
// the report names kind, object, group and source.
func TestKarmadaUnsupportedKinds(t *testing.T) {
	res, _ := convertFile(t, "unsupported.yaml", Options{})
	var whole []string
	for _, f := range res.Unsupported {
		if f.Path == "" {
			whole = append(whole, f.String())
		}
	}
	want := []string{
		// The seed's customization puts its script at spec.healthInterpretation,
		// where Karmada has no field (it belongs under spec.customizations):
		// reported, and with nothing converted not emitted.
		"ResourceInterpreterCustomization declarative-configuration-example: no operation converted, not emitted (unsupported.yaml, document 3)",
		"FederatedHPA default/nginx (autoscaling.karmada.io/v1alpha1): kind not supported by Flotilla (no federated autoscaling), not emitted (unsupported.yaml, document 4)",
		"Remedy foo (rededition.karmada.io/v1alpha1): kind not supported by Flotilla, not emitted (unsupported.yaml, document 5)",
	}
	if !reflect.DeepEqual(whole, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(whole, "\n"), strings.Join(want, "\n"))
	}
	// Karmada fields Flotilla lacks say why; unknown ones only that they
	// are not supported.
	lines := map[string]string{
		"spec.placement.replicaScheduling.foo": "PropagationPolicy default/nginx: spec.placement.replicaScheduling.foo: not supported by Flotilla, dropped (unsupported.yaml, document 1)",
		"spec.schedulerName":                   "PropagationPolicy default/nginx: spec.schedulerName: not supported by Flotilla (Flotilla has one scheduler, in the hub), dropped (unsupported.yaml, document 1)",
		"spec.failover.application.statePreservation.rules[1]": `PropagationPolicy default/nginx: spec.failover.application.statePreservation.rules[1]: jsonPath ".readyReplicas" is not a JSONPath template in braces, ` +
			"e.g. {.jobStatus.checkpointPath} (Karmada would carry the text itself), rule dropped (unsupported.yaml, document 1)",
	}
	for _, f := range res.Unsupported {
		if want, ok := lines[f.Path]; ok {
			delete(lines, f.Path)
			if got := f.String(); got != want {
				t.Errorf("report line\n%s\nwant\n%s", got, want)
			}
		}
	}
	if len(lines) > 0 {
		t.Errorf("not reported: %v", lines)
	}

	const other = `apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata: {name: nginx-deployment, namespace: default}
---
apiVersion: policy.karmada.io/v1alpha2
kind: PropagationPolicy
metadata: {name: future}
`
	res, err := Wrap([]Input{{Name: "in", Data: []byte(other)}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 0 || len(res.Unsupported) != 2 ||
		!strings.Contains(res.Unsupported[0].Message, "the Flotilla hub makes its own") ||
		!strings.Contains(res.Unsupported[1].Message, "version v1alpha2 not supported") {
		t.Errorf("objects %v, unsupported %v", res.Objects, res.Unsupported)
	}
}

// The other Karmada kinds Flotilla has: ClusterPropagationPolicy,
// ClusterOverridePolicy, ClusterTaintPolicy (from policy.karmada.io into
// cluster.flotilla.io), Cluster and MultiClusterIngress; keys rewritten in
// taints, selectors and the labels overrider.
func TestKarmadaOtherKinds(t *testing.T) {
	const in = `apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: crds, namespace: ignored}
spec:
  resourceSelectors:
  - apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    labelSelector:
      matchLabels: {karmada.io/managed: "true"}
      matchExpressions: [{key: propagationpolicy.karmada.io/name, operator: Exists}]
  placement:
    spreadConstraints: [{spreadByLabel: karmada.io/managed, maxGroups: 1}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: labels}
spec:
  overrideRules:
  - overriders:
      labelsOverrider:
      - operator: add
        value: {propagationpolicy.karmada.io/permanent-id: x, app: web}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: dns}
spec:
  addOnConditions: [{conditionType: ServiceDomainNameResolutionReady, operator: In, statusValues: ["False"]}]
  taints: [{key: cluster.karmada.io/not-ready, effect: NoSchedule}]
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec:
  apiEndpoint: https://192.10.0.1:6443
  syncMode: Push
  secretRef: {namespace: karmada-cluster, name: member1}
status:
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata: {name: web}
spec:
  rules: [{host: web.example.com}]
`
	res, err := Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{FromKarmada: true, Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.YAML()
	objs := decodeStream(t, out)
	if len(objs) != 5 {
		t.Fatalf("%d objects", len(objs))
	}
	cpp := objs[0].(*policyv1alpha1.ClusterPropagationPolicy)
	ls := cpp.Spec.ResourceSelectors[0].LabelSelector
	if cpp.Namespace != "" || ls.MatchLabels[workv1alpha1.LabelManaged] != "true" || ls.MatchExpressions[0].Key != "propagationpolicy.flotilla.io/name" ||
		cpp.Spec.Placement.SpreadConstraints[0].SpreadByLabel != workv1alpha1.LabelManaged {
		t.Errorf("ClusterPropagationPolicy %+v", cpp)
	}
	cop := objs[1].(*policyv1alpha1.ClusterOverridePolicy)
	if v := cop.Spec.OverrideRules[0].Overriders.LabelsOverrider[0].Value; v["propagationpolicy.karmada.io/permanent-id"] != "x" || v["app"] != "web" {
		t.Errorf("labels overrider %v", v)
	}
	ctp := objs[2].(*clusterv1alpha1.ClusterTaintPolicy)
	if ctp.Spec.Taints[0].Key != clusterv1alpha1.TaintClusterNotReady || ctp.APIVersion != "cluster.flotilla.io/v1alpha1" {
		t.Errorf("ClusterTaintPolicy %+v", ctp)
	}
	if c := objs[3].(*clusterv1alpha1.Cluster); c.Spec.SyncMode != "" || c.Spec.APIEndpoint == "" || len(c.Status.Conditions) != 0 {
		t.Errorf("Cluster %+v", c)
	}
	if got := paths(res); !reflect.DeepEqual(got, []string{"spec.secretRef", "spec.syncMode"}) {
		t.Errorf("unsupported %v", got)
	}
	if res.Objects[4].GetNamespace() != "shop" {
		t.Errorf("MultiClusterIngress namespace %q", res.Objects[4].GetNamespace())
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{
		`ClusterPropagationPolicy crds: cluster-scoped, metadata.namespace "ignored" removed`,
		"ClusterPropagationPolicy crds: spec.resourceSelectors[0].labelSelector.matchExpressions[0].key: propagationpolicy.karmada.io/name rewritten to propagationpolicy.flotilla.io/name",
		"ClusterPropagationPolicy crds: spec.resourceSelectors[0].labelSelector.matchLabels: karmada.io/managed rewritten to flotilla.io/managed",
		"ClusterOverridePolicy labels: spec.overrideRules[0].overriders.labelsOverrider[0].value: propagationpolicy.karmada.io/permanent-id has no Flotilla equivalent, kept",
		"ClusterTaintPolicy dns: spec.taints[0].key: cluster.karmada.io/not-ready rewritten to cluster.flotilla.io/not-ready",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// A field of the wrong type inside a list is found with its index, and
// only that element goes.
func TestKarmadaTypeErrorInList(t *testing.T) {
	const in = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Service, name: a}
  - {apiVersion: v1, kind: Service, name: [b]}
  placement:
    clusterAffinity: {clusterNames: [member1, {name: member2}]}
    replicaScheduling: {weightPreference: {staticWeightList: [{targetCluster: {}, weight: heavy}]}}
`
	res, err := Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"spec.placement.clusterAffinity.clusterNames[1]",
		"spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight", "spec.resourceSelectors[1].name"}
	if got := paths(res); !reflect.DeepEqual(got, want) {
		t.Errorf("paths %v, want %v", got, want)
	}
	out, _ := res.YAML()
	pp := decodeStream(t, out)[0].(*policyv1alpha1.PropagationPolicy)
	if len(pp.Spec.ResourceSelectors) != 2 || pp.Spec.ResourceSelectors[1].Name != "" ||
		!reflect.DeepEqual(pp.Spec.Placement.ClusterAffinity.ClusterNames, []string{"member1"}) {
		t.Errorf("spec %+v", pp.Spec)
	}
	for _, f := range res.Unsupported {
		if !strings.Contains(f.Message, "wrong type for Flotilla") {
			t.Errorf("message %q", f.Message)
		}
	}
}

func TestRemovePath(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"a.b":   map[string]any{"c": int64(1), "d": int64(2)},
		"list":  []any{map[string]any{"x": int64(1)}, map[string]any{"x": int64(2), "y": int64(3)}},
		"items": []any{"p", "q", "r"},
	}}
	for _, p := range []string{"spec.a.b.c", "spec.list[1].y", "spec.items[1]"} {
		if !removePath(obj, p) {
			t.Errorf("%s not removed", p)
		}
	}
	for _, p := range []string{"spec.missing", "spec.list[5].x", "spec.items[x]", "nope"} {
		if removePath(obj, p) {
			t.Errorf("%s removed", p)
		}
	}
	want := map[string]any{"spec": map[string]any{
		"a.b":   map[string]any{"d": int64(2)},
		"list":  []any{map[string]any{"x": int64(1)}, map[string]any{"x": int64(2)}},
		"items": []any{"p", "r"},
	}}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("got %v", obj)
	}
}

// Karmada v1.18's overflowAffinities port as they are, with a note on
// what behaves otherwise.
func TestKarmadaOverflowAffinities(t *testing.T) {
	const in = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx, namespace: default}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: nginx}
  placement:
    clusterAffinities:
    - affinityName: on-prem
      clusterNames: [cluster1]
      overflowAffinities:
      - affinityName: public-cloud
        clusterNames: [cluster2, cluster3]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference: {dynamicWeight: AvailableReplicas}
`
	res, err := Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unsupported) != 0 {
		t.Fatalf("unsupported %v", paths(res))
	}
	out, _ := res.YAML()
	pp := decodeStream(t, out)[0].(*policyv1alpha1.PropagationPolicy)
	if o := pp.Spec.Placement.ClusterAffinities[0].OverflowAffinities; len(o) != 1 || o[0].AffinityName != "public-cloud" ||
		!reflect.DeepEqual(o[0].ClusterNames, []string{"cluster2", "cluster3"}) {
		t.Fatalf("overflowAffinities %+v", o)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "clusterAffinities[0].overflowAffinities: a cluster that has not reported a resourceSummary has no room") {
		t.Fatalf("notes lack the overflow difference:\n%s", notes)
	}
}
