package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
)

func TestParseTemplateArg(t *testing.T) {
	for _, tc := range []struct {
		arg           string
		clusterScoped bool
		want          TemplateRef
		wantErr       bool
	}{
		{arg: "nginx", want: TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: "nginx", Namespace: "ns"}},
		{arg: "resourcetemplate/nginx", want: TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: "nginx", Namespace: "ns"}},
		{arg: "nginx", clusterScoped: true, want: TemplateRef{TemplateKind: "ClusterResourceTemplate", TemplateName: "nginx"}},
		{arg: "ClusterResourceTemplate/crds", want: TemplateRef{TemplateKind: "ClusterResourceTemplate", TemplateName: "crds"}},
		{arg: "deployment/nginx", want: TemplateRef{Kind: "deployment", Name: "nginx", Namespace: "ns"}},
		{arg: "deploy/nginx", want: TemplateRef{Kind: "Deployment", Name: "nginx", Namespace: "ns"}},
		{arg: "namespace/team-a", clusterScoped: true, want: TemplateRef{Kind: "namespace", Name: "team-a"}},
		{arg: "deployment/", wantErr: true},
		{arg: "a/b/c", wantErr: true},
	} {
		got, err := ParseTemplateArg(tc.arg, "ns", tc.clusterScoped)
		if (err != nil) != tc.wantErr || err == nil && got != tc.want {
			t.Errorf("ParseTemplateArg(%q, %v) = %+v, %v; want %+v (error %v)", tc.arg, tc.clusterScoped, got, err, tc.want, tc.wantErr)
		}
	}
}

func readyCluster(name, region string, status metav1.ConditionStatus, reason string) clusterv1alpha1.Cluster {
	c := clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Region: region}}
	if status != "" {
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status, Reason: reason}}
	}
	return c
}

func TestBuildClustersView(t *testing.T) {
	renew := metav1.NewMicroTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	holder := "agent-pod-1"
	m1 := readyCluster("m1", "eu", metav1.ConditionTrue, "ClusterReady")
	m1.Status.RemedyActions = []string{"TrafficControl"}
	m1.Status.KubernetesVersion = "v1.31.0"
	m2 := readyCluster("m2", "us", metav1.ConditionFalse, "ClusterNotReady")
	m2.Spec.Taints = []corev1.Taint{{Key: "cluster.flotilla.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
	neverReported := readyCluster("m0", "", "", "")
	clusters := []clusterv1alpha1.Cluster{m2, m1, neverReported}
	leases := map[string]*coordinationv1.Lease{"m1": {Spec: coordinationv1.LeaseSpec{RenewTime: &renew, HolderIdentity: &holder}}}
	state := clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardNormal, NotReady: 1, Total: 2,
		Regions: map[string]clustertaint.RegionState{"eu": {Mode: clustertaint.GuardNormal, Total: 1}, "us": {Mode: clustertaint.GuardFullDisruption, NotReady: 1, Total: 1}}}
	cm := &corev1.ConfigMap{Data: clustertaint.GuardConfigMapData(state, renew.Time)}

	for _, tc := range []struct {
		name      string
		cm        *corev1.ConfigMap
		wantFleet string
		wantM2    string
		problem   bool
	}{
		{name: "published", cm: cm, wantFleet: "Normal", wantM2: "FullDisruption"},
		{name: "hub never published (older or not running)", cm: nil, wantFleet: GuardUnknown, wantM2: GuardUnknown},
		{name: "unreadable", cm: &corev1.ConfigMap{Data: map[string]string{"regions": "{"}}, wantFleet: GuardUnknown, wantM2: GuardUnknown, problem: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildClustersView(clusters, leases, tc.cm)
			if len(v.Clusters) != 3 || v.Clusters[0].Name != "m0" || v.Clusters[2].Name != "m2" {
				t.Fatalf("clusters %+v, want m0, m1, m2 in order", v.Clusters)
			}
			if v.Guard.Mode != tc.wantFleet || v.Guard.Published != (tc.wantFleet != GuardUnknown) || (v.Guard.Problem != "") != tc.problem {
				t.Errorf("guard %+v, want mode %s (problem %v)", v.Guard, tc.wantFleet, tc.problem)
			}
			m0, m1v, m2v := v.Clusters[0], v.Clusters[1], v.Clusters[2]
			if m2v.FleetGuard != tc.wantFleet || m2v.RegionGuard != tc.wantM2 {
				t.Errorf("m2 guard %s/%s, want %s/%s", m2v.FleetGuard, m2v.RegionGuard, tc.wantFleet, tc.wantM2)
			}
			if m0.Ready != "" || m0.LastHeartbeat != nil || m0.RegionGuard != GuardUnknown {
				t.Errorf("a cluster that never reported: %+v", m0)
			}
			if m1v.Ready != "True" || m1v.ReadyReason != "ClusterReady" || !m1v.LastHeartbeat.Equal(&metav1.Time{Time: renew.Time}) ||
				m1v.Agent != holder || m1v.RemedyActions[0] != "TrafficControl" {
				t.Errorf("m1 %+v", m1v)
			}
			if m2v.Ready != "False" || len(m2v.Taints) != 1 || m2v.Taints[0] != "cluster.flotilla.io/not-ready:NoSchedule" {
				t.Errorf("m2 %+v", m2v)
			}
		})
	}

	// The table: kubectl columns, heartbeat age, short taints, and
	// placeholders for what is missing.
	var out bytes.Buffer
	o := &Options{Out: &out, Now: func() time.Time { return renew.Add(42 * time.Second) }}
	if err := o.printClusters(BuildClustersView(clusters, leases, cm)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME", "LAST-HEARTBEAT", "42s ago", "<never>", "not-ready:NoSchedule", "Normal/FullDisruption", "Unknown", "TrafficControl"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBuildWhereView(t *testing.T) {
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx"}}`)}}},
		Status: workv1alpha1.ResourceTemplateStatus{Conditions: []metav1.Condition{{Type: "Propagated", Status: "True", Reason: "PolicyMatched"}}}}
	ref := TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: "web", Namespace: "ns"}

	t.Run("no binding", func(t *testing.T) {
		v := BuildWhereView(ref, tmpl, nil, nil, nil)
		if v.Problem == "" || len(v.Clusters) != 0 || v.Resource != "Deployment/nginx" || len(v.Conditions) != 1 {
			t.Errorf("%+v", v)
		}
	})
	t.Run("nothing at all", func(t *testing.T) {
		v := BuildWhereView(TemplateRef{Kind: "deployment", Name: "x"}, nil, nil, nil, nil)
		if v.Problem == "" || v.Clusters == nil {
			t.Errorf("%+v", v)
		}
	})

	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "ns"},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3,
			Resource: workv1alpha1.ObjectReference{Kind: "Deployment", Name: "nginx"},
			Clusters: []workv1alpha1.TargetCluster{{Name: "m2", Replicas: 3}},
			EvictionHistory: []workv1alpha1.EvictionHistoryEntry{{ClusterName: "m3", Reason: "ApplicationFailure", EvictedAt: start},
				{ClusterName: "m1", Reason: "TaintUntolerated", EvictedAt: start}},
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "m1", Reason: "TaintUntolerated", Producer: "taint-manager",
				PurgeMode: "Gracefully", Replicas: ptr.To[int32](3), CreationTimestamp: &start}}},
		Status: workv1alpha1.ResourceBindingStatus{
			AggregatedStatus: []workv1alpha1.AggregatedStatusItem{
				{ClusterName: "m1", Applied: true, Health: workv1alpha1.ResourceHealthy,
					Status: &runtime.RawExtension{Raw: []byte(`{"replicas":3,"readyReplicas":3,"availableReplicas":3}`)}},
				// A Deployment with no ready replica reports none at all.
				{ClusterName: "m2", Health: workv1alpha1.ResourceUnhealthy, Status: &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}},
			},
			FailoverHistory: []workv1alpha1.FailoverHistoryItem{
				{Reason: "ApplicationFailure", OriginCluster: "m3", ClustersAfterFailover: []string{"m1"}, StartTime: start, EndTime: &start, DegradedSeconds: 30},
				{Reason: "TaintUntolerated", OriginCluster: "m1", ClustersAfterFailover: []string{"m2"}, StartTime: start, DegradedSince: &start},
			},
			Conditions: []metav1.Condition{{Type: "Scheduled", Status: "True", Reason: "Success", Message: "scheduled on m2"}},
		}}
	works := map[string]*workv1alpha1.Work{
		"m2": {ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "flotilla-es-m2"}, Status: workv1alpha1.WorkStatus{
			Conditions: []metav1.Condition{{Type: "Applied", Status: "False", Reason: "AppliedFailed", Message: "quota exceeded"}}}},
		// A Work whose cluster is in neither spec nor status (being deleted).
		"m4": {ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "flotilla-es-m4", DeletionTimestamp: &start}},
	}
	events := []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Kind: "ResourceBinding", Name: "nginx-deployment"}, Reason: "Old", LastTimestamp: start},
		{InvolvedObject: corev1.ObjectReference{Kind: "ResourceBinding", Name: "nginx-deployment"}, Reason: "New", LastTimestamp: metav1.NewTime(start.Add(time.Minute))},
	}
	v := BuildWhereView(ref, tmpl, b, works, events)
	if len(v.Clusters) != 3 {
		t.Fatalf("clusters %+v, want m1 (evicting), m2, m4", v.Clusters)
	}
	m1, m2, m4 := v.Clusters[0], v.Clusters[1], v.Clusters[2]
	if m1.Scheduled || !m1.Evicting || *m1.Ready != 3 || m1.Health != "Healthy" || m1.Applied != "True" {
		t.Errorf("m1 %+v", m1)
	}
	if !m2.Scheduled || m2.Replicas != 3 || *m2.Ready != 0 || *m2.Available != 0 || m2.Applied != "False" || m2.AppliedMessage != "quota exceeded" || m2.Work != "flotilla-es-m2/w" {
		t.Errorf("m2 %+v", m2)
	}
	if m4.Scheduled || m4.Ready != nil || m4.Applied != "" || !m4.WorkDeleting {
		t.Errorf("m4 %+v", m4)
	}
	if len(v.EvictionTasks) != 1 || v.EvictionTasks[0].PurgeMode != "Gracefully" || v.EvictionTasks[0].Producer != "taint-manager" {
		t.Errorf("eviction tasks %+v", v.EvictionTasks)
	}
	if len(v.Evictions) != 2 || v.Evictions[0].Cluster != "m1" {
		t.Errorf("evictions %+v, want newest (m1) first", v.Evictions)
	}
	if len(v.FailoverHistory) != 2 || v.FailoverHistory[0].From != "m1" {
		t.Errorf("history %+v, want newest (from m1) first", v.FailoverHistory)
	}
	if len(v.Conditions) != 2 || v.Conditions[0].Object != "Binding" || v.Conditions[1].Object != "Template" {
		t.Errorf("conditions %+v", v.Conditions)
	}
	if len(v.Events) != 2 || v.Events[0].Reason != "New" {
		t.Errorf("events %+v, want newest first", v.Events)
	}

	var out bytes.Buffer
	o := &Options{Out: &out, Now: func() time.Time { return start.Add(2 * time.Minute) }}
	if err := o.printWhere(v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ResourceTemplate:", "nginx-deployment", "evicting", "quota exceeded", "Graceful eviction tasks:", "Gracefully", "Recent evictions",
		"Failover history", "m1 ", "30s", "Work being deleted", "for 2m (ongoing)", "scheduled on m2", "Events"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// -o json is the same struct.
	out.Reset()
	o.Output = "json"
	if err := o.printWhere(v); err != nil {
		t.Fatal(err)
	}
	var back WhereView
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Clusters) != 3 || *back.Clusters[0].Ready != 3 {
		t.Errorf("json round trip: %v %+v", err, back)
	}
}

func TestBuildExplainView(t *testing.T) {
	ref := TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: "web", Namespace: "ns"}
	decided := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	decision := &workv1alpha1.SchedulingDecision{DecidedTime: decided, AffinityName: "primary", OmittedClusters: 30,
		FilteredCounts: []workv1alpha1.FilterCount{{Reason: workv1alpha1.DecisionTaintUntolerated, Count: 31}},
		Clusters: []workv1alpha1.ClusterDecision{
			{ClusterName: "m1", Selected: true, Replicas: 2, Score: ptr.To[int32](100), Reason: workv1alpha1.DecisionSelected},
			{ClusterName: "m2", Score: ptr.To[int32](0), Reason: workv1alpha1.DecisionNotSelectedBySpread},
			{ClusterName: "m3", Reason: workv1alpha1.DecisionTaintUntolerated, Message: "taint cluster.flotilla.io/not-ready:NoSchedule"},
		}}
	binding := func(d *workv1alpha1.SchedulingDecision) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "ns"},
			Status: workv1alpha1.ResourceBindingStatus{SchedulingDecision: d}}
	}
	for _, tc := range []struct {
		name        string
		b           *workv1alpha1.ResourceBinding
		cluster     string
		recorded    bool
		wantResults map[string]string
		wantNote    string
	}{
		{name: "no binding", b: nil, wantNote: "no binding"},
		{name: "scheduled before decisions were recorded", b: binding(nil), wantNote: "the next schedule records one"},
		{name: "every listed cluster", b: binding(decision), recorded: true,
			wantResults: map[string]string{"m1": ResultSelected, "m2": ResultNotSelected, "m3": ResultFiltered}},
		{name: "one listed cluster", b: binding(decision), cluster: "m3", recorded: true, wantResults: map[string]string{"m3": ResultFiltered}},
		{name: "an omitted cluster", b: binding(decision), cluster: "m40", recorded: true, wantResults: map[string]string{},
			wantNote: "one of the 30 clusters the decision does not list"},
		{name: "a cluster unknown to a full decision", b: binding(&workv1alpha1.SchedulingDecision{DecidedTime: decided}), cluster: "x", recorded: true,
			wantResults: map[string]string{}, wantNote: "not a cluster of the fleet"},
		{name: "a decision without time or clusters", b: binding(&workv1alpha1.SchedulingDecision{}), recorded: true, wantResults: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildExplainView(ref, tc.b, tc.cluster)
			if v.Recorded != tc.recorded {
				t.Errorf("recorded %v, want %v", v.Recorded, tc.recorded)
			}
			if tc.wantResults != nil {
				got := map[string]string{}
				for _, c := range v.Clusters {
					got[c.Cluster] = c.Result
				}
				if len(got) != len(tc.wantResults) {
					t.Errorf("results %v, want %v", got, tc.wantResults)
				}
				for k, want := range tc.wantResults {
					if got[k] != want {
						t.Errorf("results %v, want %v", got, tc.wantResults)
					}
				}
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(v.Notes, "\n"), tc.wantNote) {
				t.Errorf("notes %q, want %q", v.Notes, tc.wantNote)
			}
			// Every case prints as a table and as JSON without failing.
			for _, format := range []string{"", "json", "yaml"} {
				var out bytes.Buffer
				o := &Options{Out: &out, Output: format, Now: func() time.Time { return decided.Add(time.Hour) }}
				if err := o.printExplain(v); err != nil || out.Len() == 0 {
					t.Errorf("printing %q: %v %q", format, err, out.String())
				}
			}
		})
	}
}

func TestBuildWhereList(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	isController := true
	bindings := []workv1alpha1.ResourceBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "ns1",
			OwnerReferences: []metav1.OwnerReference{{Kind: "ResourceTemplate", Name: "web", Controller: &isController}}},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Resource: workv1alpha1.ObjectReference{Kind: "Deployment", Name: "nginx"},
				Clusters:              []workv1alpha1.TargetCluster{{Name: "m1", Replicas: 1}, {Name: "m2", Replicas: 2}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "m3"}}},
			Status: workv1alpha1.ResourceBindingStatus{
				Conditions:      []metav1.Condition{{Type: "Scheduled", Status: "True"}, {Type: "FullyApplied", Status: "False"}},
				FailoverHistory: []workv1alpha1.FailoverHistoryItem{{Reason: "Old"}, {Reason: "TaintUntolerated", OriginCluster: "m3", ClustersAfterFailover: []string{"m1", "m2"}, StartTime: start}}}},
		// Cluster-scoped, no replicas.
		{ObjectMeta: metav1.ObjectMeta{Name: "team-namespace"}, Spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "m1"}}}},
	}
	v := BuildWhereList(bindings)
	if len(v.Items) != 3 || v.Items[0].Binding != "team-namespace" || v.Items[1].Namespace != "ns1" || v.Items[2].Namespace != "ns2" {
		t.Fatalf("items %+v, want cluster-scoped, ns1, ns2", v.Items)
	}
	web := v.Items[1]
	if web.Template != "ResourceTemplate/web" || strings.Join(web.Clusters, ",") != "m1(1),m2(2)" || web.Scheduled != "True" ||
		web.FullyApplied != "False" || web.Evicting[0] != "m3" || web.LastFailover == nil || web.LastFailover.Reason != "TaintUntolerated" {
		t.Errorf("web %+v", web)
	}
	if v.Items[0].Clusters[0] != "m1" || v.Items[2].Scheduled != "" || v.Items[2].LastFailover != nil {
		t.Errorf("partial bindings %+v", v.Items)
	}
	var out bytes.Buffer
	o := &Options{Out: &out, Now: func() time.Time { return start.Add(time.Minute) }}
	if err := o.printWhereList(v, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAMESPACE", "ResourceTemplate/web", "m1(1),m2(2)", "TaintUntolerated m3->m1,m2 60s ago", "binding/b"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestWhereShowsTheRollout(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{}
	b.Status.Rollout = &workv1alpha1.RolloutStatus{Revision: 2, StableRevision: 1, Phase: workv1alpha1.RolloutPhaseHalted, Group: "canary"}
	v := BuildWhereView(TemplateRef{}, nil, b, nil, nil)
	if want := "revision 2 Halted in group canary (stable 1; kubectl flotilla rollout status)"; v.Rollout != want {
		t.Fatalf("rollout %q, want %q", v.Rollout, want)
	}
	b.Status.Rollout = &workv1alpha1.RolloutStatus{Revision: 3, StableRevision: 3, Phase: workv1alpha1.RolloutPhaseComplete, Group: "remaining"}
	if v := BuildWhereView(TemplateRef{}, nil, b, nil, nil); v.Rollout != "revision 3 Complete" {
		t.Fatalf("rollout %q", v.Rollout)
	}
}
