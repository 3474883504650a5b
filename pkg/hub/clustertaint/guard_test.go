package clustertaint

import (
	"testing"

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
		g := NewFleetGuard(0.55, 0.5, 0.1)
		state, _ := g.Update(tc.clusters)
		if state.Mode != tc.mode || g.EvictionRate() != tc.rate || g.AllowsNoExecute() != (tc.mode != GuardFullDisruption) {
			t.Errorf("%s: mode %s rate %v, want %s %v", tc.name, state.Mode, g.EvictionRate(), tc.mode, tc.rate)
		}
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
