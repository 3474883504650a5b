package clustertaint

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

func fleet(ready ...metav1.ConditionStatus) []*clusterv1alpha1.Cluster {
	var out []*clusterv1alpha1.Cluster
	for i, s := range ready {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i))}, Spec: clusterv1alpha1.ClusterSpec{Region: "r"}}
		if s != "" {
			c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: s}}
		}
		out = append(out, c)
	}
	return out
}

func TestFleetGuard(t *testing.T) {
	const T, F, U = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	cases := []struct {
		name     string
		clusters []*clusterv1alpha1.Cluster
		mode     string
		rate     float64
	}{
		{"healthy", fleet(T, T, T), GuardNormal, 0.5},
		{"one of three down", fleet(T, T, U), GuardNormal, 0.5},
		{"two of three down", fleet(T, F, U), GuardPartialDisruption, 0.1},
		{"two of two down is full, not partial", fleet(F, U), GuardFullDisruption, 0},
		{"all down", fleet(U, U, U, U), GuardFullDisruption, 0},
		{"never-reported clusters do not count", fleet(T, "", "", ""), GuardNormal, 0.5},
		{"only never-reported clusters", fleet("", ""), GuardNormal, 0.5},
	}
	for _, tc := range cases {
		g := NewFleetGuard(0.55, 0.5, 0.1).WithLargeFleetSizeThreshold(2)
		state, _ := g.Update(tc.clusters)
		if state.Mode != tc.mode || g.RegionEvictionRate("r") != tc.rate || g.AllowsNoExecute() != (tc.mode != GuardFullDisruption) {
			t.Errorf("%s: mode %s rate %v, want %s %v", tc.name, state.Mode, g.RegionEvictionRate("r"), tc.mode, tc.rate)
		}
	}
}

func TestRegionRate(t *testing.T) {
	const primary, secondary, large = 0.5, 0.01, 10
	N, P, F := GuardNormal, GuardPartialDisruption, GuardFullDisruption
	rs := func(mode string, notReady, total int) RegionState {
		return RegionState{Mode: mode, NotReady: notReady, Total: total}
	}
	for _, tc := range []struct {
		name          string
		fleet, region RegionState
		want          float64
	}{
		{"normal region in a normal fleet", rs(N, 0, 40), rs(N, 0, 20), primary},
		{"the whole fleet down holds everything", rs(F, 40, 40), rs(F, 20, 20), 0},
		{"large region in a partial disruption slows down", rs(N, 12, 40), rs(P, 12, 20), secondary},
		{"small fleet in a partial disruption stops (3 clusters, 2 silent)", rs(P, 2, 3), rs(P, 2, 3), 0},
		{"region at the threshold is small", rs(N, 6, 40), rs(P, 6, large), 0},
		{"region just above the threshold is large", rs(N, 7, 40), rs(P, 7, large+1), secondary},
		{"a small partial region stops even in a normal fleet", rs(N, 2, 40), rs(P, 2, 3), 0},
		{"a region fully down while others are up fails over at the primary rate", rs(N, 1, 5), rs(F, 1, 1), primary},
		{"3 clusters in 3 regions, 2 silent: the small fleet's partial disruption stops it", rs(P, 2, 3), rs(F, 1, 1), 0},
		{"a large fleet's partial disruption slows even a normal region", rs(P, 12, 20), rs(N, 0, 2), secondary},
		{"a large fleet in a partial disruption, a small region in one: stops", rs(P, 12, 20), rs(P, 2, 3), 0},
	} {
		if got := RegionRate(tc.fleet, tc.region, large, primary, secondary); got != tc.want {
			t.Errorf("%s: rate %v, want %v", tc.name, got, tc.want)
		}
	}
}

func mkCluster(name, region string, ready metav1.ConditionStatus) *clusterv1alpha1.Cluster {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Region: region}}
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: ready}}
	}
	return c
}

func TestJudgePerRegion(t *testing.T) {
	const T, U = metav1.ConditionTrue, metav1.ConditionUnknown
	s := Judge([]*clusterv1alpha1.Cluster{
		mkCluster("a1", "a", U), mkCluster("a2", "a", U), mkCluster("a3", "a", T),
		mkCluster("b1", "b", U),
		mkCluster("c1", "c", T), mkCluster("c2", "c", T),
		mkCluster("n1", "", T), mkCluster("n2", "", U), mkCluster("n3", "", ""),
	}, 0.55)
	want := map[string]RegionState{
		"a": {Mode: GuardPartialDisruption, NotReady: 2, Total: 3},
		"b": {Mode: GuardFullDisruption, NotReady: 1, Total: 1},
		"c": {Mode: GuardNormal, Total: 2},
		"":  {Mode: GuardNormal, NotReady: 1, Total: 2}, // the never-reported n3 does not count
	}
	if len(s.Regions) != len(want) {
		t.Fatalf("regions %+v", s.Regions)
	}
	for r, w := range want {
		if s.Regions[r] != w {
			t.Errorf("region %q: %+v, want %+v", r, s.Regions[r], w)
		}
	}
	if s.Mode != GuardNormal || s.NotReady != 4 || s.Total != 8 || !s.Evaluated {
		t.Errorf("fleet %+v", s)
	}
}

// Admission is per cluster: one token admits a cluster, and every later
// admission of it is free until it is forgotten.
func TestAdmit(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const T, U = metav1.ConditionTrue, metav1.ConditionUnknown
	healthy := func(n int) []*clusterv1alpha1.Cluster {
		var out []*clusterv1alpha1.Cluster
		for i := range n {
			out = append(out, mkCluster(fmt.Sprintf("m%d", i), "", T))
		}
		return out
	}

	g := NewFleetGuard(0.55, 0.5, 0.01)
	if ok, retry := g.Admit("m0", "", now); ok || retry <= 0 || g.AllowsNoExecute() {
		t.Fatalf("before the first evaluation the guard must refuse (ok %v, retry %s)", ok, retry)
	}
	g.update(healthy(20), now)
	if ok, _ := g.Admit("m0", "", now); !ok {
		t.Fatal("first cluster: admitted at once")
	}
	for range 1000 {
		if ok, _ := g.Admit("m0", "", now); !ok {
			t.Fatal("an admitted cluster takes no further tokens")
		}
	}
	ok, retry := g.Admit("m1", "", now)
	if ok || retry < time.Second || retry > 2*time.Second {
		t.Fatalf("second cluster in the same instant at 0.5/s: ok %v retry %s, want a wait of ~2s", ok, retry)
	}
	if ok, _ := g.Admit("m1", "", now.Add(2*time.Second)); !ok {
		t.Fatal("second cluster: admitted 2s later")
	}
	g.Forget("m0")
	if ok, _ := g.Admit("m0", "", now.Add(2*time.Second)); ok {
		t.Fatal("a forgotten cluster takes a new token")
	}

	// Regions have their own limiters.
	g2 := NewFleetGuard(0.55, 0.5, 0.01)
	g2.update([]*clusterv1alpha1.Cluster{mkCluster("a", "r1", T), mkCluster("b", "r2", T)}, now)
	if ok1, _ := g2.Admit("a", "r1", now); !ok1 {
		t.Fatal("r1: admitted")
	}
	if ok2, _ := g2.Admit("b", "r2", now); !ok2 {
		t.Fatal("r2 has its own bucket")
	}

	// A fleet-wide outage holds even admitted clusters.
	fleetDown := healthy(3)
	for _, c := range fleetDown {
		c.Status.Conditions[0].Status = U
	}
	g.update(fleetDown, now)
	if ok, _ := g.Admit("m1", "", now.Add(time.Hour)); ok || g.AllowsNoExecute() {
		t.Fatal("whole fleet down: nothing admitted, no NoExecute")
	}

	// A small fleet in a partial disruption: nothing (issue 17: 3 clusters, 2 silent).
	small := healthy(3)
	small[0].Status.Conditions[0].Status, small[1].Status.Conditions[0].Status = U, U
	g3 := NewFleetGuard(0.55, 0.5, 0.01)
	g3.update(small, now)
	if ok, _ := g3.Admit("m0", "", now.Add(time.Hour)); ok || g3.AllowsNoExecuteIn("") || !g3.AllowsNoExecute() {
		t.Fatal("3 clusters, 2 silent: nothing admitted and no NoExecute in the region")
	}

	// A large fleet in a partial disruption: the secondary rate, empty bucket first.
	large := healthy(20)
	for i := range 12 {
		large[i].Status.Conditions[0].Status = U
	}
	g4 := NewFleetGuard(0.55, 0.5, 0.01)
	g4.update(large, now)
	if ok, _ := g4.Admit("m0", "", now); ok {
		t.Fatal("partial disruption: the bucket starts empty")
	}
	if ok, _ := g4.Admit("m0", "", now.Add(101*time.Second)); !ok {
		t.Fatal("partial disruption at 0.01/s: one cluster after 100s")
	}
}

// Admissions of clusters that are gone are forgotten; so are admissions
// without a NoExecute taint (application failover) after a minute.
func TestUpdateForgetsAdmissions(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const T = metav1.ConditionTrue
	tainted := mkCluster("t", "", T)
	tainted.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}
	plain, gone := mkCluster("p", "", T), mkCluster("g", "", T)
	g := NewFleetGuard(0.55, 1000, 0.01)
	g.update([]*clusterv1alpha1.Cluster{tainted, plain, gone}, now)
	for i, c := range []string{"t", "p", "g"} {
		if ok, _ := g.Admit(c, "", now.Add(time.Duration(i+1)*time.Second)); !ok {
			t.Fatalf("%s: admitted", c)
		}
	}
	g.update([]*clusterv1alpha1.Cluster{tainted, plain}, now.Add(4*time.Second))
	if !g.Admitted("t") || !g.Admitted("p") || g.Admitted("g") {
		t.Fatal("a gone cluster is forgotten, the others kept")
	}
	g.update([]*clusterv1alpha1.Cluster{tainted, plain}, now.Add(2*time.Minute))
	if !g.Admitted("t") || g.Admitted("p") {
		t.Fatal("after a minute, only the NoExecute-tainted cluster stays admitted")
	}
}

func TestConditionsMatch(t *testing.T) {
	c := &clusterv1alpha1.Cluster{Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{
		{Type: "A", Status: metav1.ConditionFalse}, {Type: "B", Status: metav1.ConditionTrue}}}}
	in := func(t string, s ...metav1.ConditionStatus) clusterv1alpha1.MatchCondition {
		return clusterv1alpha1.MatchCondition{ConditionType: t, Operator: clusterv1alpha1.MatchConditionOpIn, StatusValues: s}
	}
	notIn := func(t string, s ...metav1.ConditionStatus) clusterv1alpha1.MatchCondition {
		return clusterv1alpha1.MatchCondition{ConditionType: t, Operator: clusterv1alpha1.MatchConditionOpNotIn, StatusValues: s}
	}
	cases := []struct {
		name string
		m    []clusterv1alpha1.MatchCondition
		want bool
	}{
		{"In holds", []clusterv1alpha1.MatchCondition{in("A", metav1.ConditionFalse)}, true},
		{"ANDed, one fails", []clusterv1alpha1.MatchCondition{in("A", metav1.ConditionFalse), in("B", metav1.ConditionFalse)}, false},
		{"NotIn holds", []clusterv1alpha1.MatchCondition{notIn("B", metav1.ConditionFalse, metav1.ConditionUnknown)}, true},
		{"missing condition never matches In", []clusterv1alpha1.MatchCondition{in("C", metav1.ConditionFalse)}, false},
		{"missing condition matches NotIn", []clusterv1alpha1.MatchCondition{notIn("C", metav1.ConditionTrue)}, true},
	}
	for _, tc := range cases {
		if got := conditionsMatch(tc.m, c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGuardCountsNotReadyPerRegion(t *testing.T) {
	mk := func(name, region string, ready metav1.ConditionStatus) *clusterv1alpha1.Cluster {
		return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Region: region},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: ready}}}}
	}
	g := NewFleetGuard(0.55, 0.5, 0.01)
	state, _ := g.Update([]*clusterv1alpha1.Cluster{mk("a", "r1", metav1.ConditionFalse), mk("b", "r1", metav1.ConditionTrue),
		mk("c", "r2", metav1.ConditionTrue), mk("d", "", metav1.ConditionUnknown)})
	if state.NotReady != 2 || state.RegionNotReady["r1"] != 1 || state.RegionNotReady["r2"] != 0 || len(state.RegionNotReady) != 2 {
		t.Fatalf("state %+v", state)
	}
}
