package ingress

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// withEndpoints sets the ready endpoints rb reports per cluster (-1: not
// reported).
func withEndpoints(rb *workv1alpha1.ResourceBinding, counts map[string]int32) *workv1alpha1.ResourceBinding {
	for c, n := range counts {
		i := slices.IndexFunc(rb.Status.AggregatedStatus, func(it workv1alpha1.AggregatedStatusItem) bool { return it.ClusterName == c })
		if i < 0 {
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha1.AggregatedStatusItem{ClusterName: c})
			i = len(rb.Status.AggregatedStatus) - 1
		}
		if n >= 0 {
			rb.Status.AggregatedStatus[i].ReadyEndpoints = ptr.To(n)
		}
	}
	return rb
}

func readyClusters(names ...string) map[string]*clusterv1alpha1.Cluster {
	out := map[string]*clusterv1alpha1.Cluster{}
	for _, n := range names {
		out[n] = member(n, metav1.ConditionTrue)
	}
	return out
}

func reasons(d Decision) map[string]string {
	out := map[string]string{}
	for _, c := range d.Status.Clusters {
		out[c.Name] = c.Reason
	}
	return out
}

// TestDecideBackendHealth: a Ready, unblocked cluster serves only while its
// backends have ready endpoints and no workload behind them is Unhealthy;
// unreported counts serve only when nothing is confirmed; nothing healthy
// fails open to what is not blocked.
func TestDecideBackendHealth(t *testing.T) {
	three := readyClusters("member1", "member2", "member3")
	web := func(counts map[string]int32) *workv1alpha1.ResourceBinding {
		return withEndpoints(binding(map[string]string{"member1": lb("10.0.0.1"), "member2": lb("10.0.0.2"), "member3": lb("10.0.0.3")}), counts)
	}
	for _, tc := range []struct {
		name      string
		counts    map[string]int32
		unhealthy []string // clusters where the workload behind web is Unhealthy
		clusters  map[string]*clusterv1alpha1.Cluster
		serving   []string
		failOpen  bool
		reasons   map[string]string
	}{
		{name: "all confirmed", counts: map[string]int32{"member1": 2, "member2": 1, "member3": 5}, clusters: three,
			serving: []string{"member1", "member2", "member3"}},
		{name: "no ready endpoints on member1 (the issue's web2)", counts: map[string]int32{"member1": 0, "member2": 1, "member3": 1}, clusters: three,
			serving: []string{"member2", "member3"}, reasons: map[string]string{"member1": networkingv1alpha1.TrafficReasonNoReadyEndpoints}},
		{name: "workload Unhealthy on member2", counts: map[string]int32{"member1": 1, "member2": 3, "member3": 1}, unhealthy: []string{"member2"}, clusters: three,
			serving: []string{"member1", "member3"}, reasons: map[string]string{"member2": networkingv1alpha1.TrafficReasonWorkloadUnhealthy}},
		{name: "never reported waits for confirmed ones", counts: map[string]int32{"member1": 1, "member2": -1, "member3": 0}, clusters: three,
			serving: []string{"member1"}, reasons: map[string]string{"member2": networkingv1alpha1.TrafficReasonEndpointsNotReported}},
		{name: "never reported serves when none is confirmed", counts: map[string]int32{"member1": -1, "member2": -1, "member3": 0}, clusters: three,
			serving: []string{"member1", "member2"}, reasons: map[string]string{"member1": networkingv1alpha1.TrafficReasonUnconfirmed}},
		{name: "nothing healthy fails open, never to a blocked cluster", counts: map[string]int32{"member1": 0, "member2": 0, "member3": 0},
			clusters: map[string]*clusterv1alpha1.Cluster{"member1": member("member1", metav1.ConditionTrue, "TrafficControl"),
				"member2": member("member2", metav1.ConditionUnknown), "member3": member("member3", metav1.ConditionTrue)},
			serving: []string{"member2", "member3"}, failOpen: true,
			reasons: map[string]string{"member1": networkingv1alpha1.TrafficReasonBlocked, "member2": networkingv1alpha1.TrafficReasonFailOpen}},
		{name: "ready endpoints on a NotReady cluster do not count", counts: map[string]int32{"member1": 1, "member2": 1, "member3": 1},
			clusters: map[string]*clusterv1alpha1.Cluster{"member1": member("member1", metav1.ConditionFalse), "member2": three["member2"], "member3": three["member3"]},
			serving:  []string{"member2", "member3"}, reasons: map[string]string{"member1": networkingv1alpha1.TrafficReasonClusterNotReady}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web(tc.counts)}}, Clusters: tc.clusters}
			if len(tc.unhealthy) > 0 {
				deploy := binding(map[string]string{"member1": "{}", "member2": "{}", "member3": "{}"})
				for i := range deploy.Status.AggregatedStatus {
					if slices.Contains(tc.unhealthy, deploy.Status.AggregatedStatus[i].ClusterName) {
						deploy.Status.AggregatedStatus[i].Health = workv1alpha1.ResourceUnhealthy
					}
				}
				in.Workloads = map[string][]*workv1alpha1.ResourceBinding{"web": {deploy}}
			}
			d := Decide(spec("web"), in)
			if !slices.Equal(d.Serving, tc.serving) || d.FailOpen != tc.failOpen {
				t.Fatalf("serving %v failOpen %v, want %v %v (%v)", d.Serving, d.FailOpen, tc.serving, tc.failOpen, reasons(d))
			}
			got := reasons(d)
			for c, want := range tc.reasons {
				if got[c] != want {
					t.Errorf("%s reason %q, want %q", c, got[c], want)
				}
			}
			var served []string
			for _, c := range d.Status.Clusters {
				if c.Serving {
					served = append(served, c.Name)
					if len(c.Addresses) != 1 {
						t.Errorf("%s serves with addresses %v", c.Name, c.Addresses)
					}
				} else if len(c.Addresses) != 0 {
					t.Errorf("%s does not serve but lists addresses %v", c.Name, c.Addresses)
				}
			}
			if !slices.Equal(served, tc.serving) {
				t.Errorf("status.clusters serving %v, want %v", served, tc.serving)
			}
		})
	}
}

// TestDecideEveryBackendCounts: a cluster serves only when every backend
// Service placed on it has ready endpoints (one path failing is failing).
func TestDecideEveryBackendCounts(t *testing.T) {
	web := withEndpoints(binding(map[string]string{"member1": lb("10.0.0.1"), "member2": lb("10.0.0.2")}), map[string]int32{"member1": 1, "member2": 1})
	api := withEndpoints(binding(map[string]string{"member1": "{}", "member2": "{}"}), map[string]int32{"member1": 0, "member2": 4})
	d := Decide(spec("web", "api"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}, "api": {api}}, Clusters: readyClusters("member1", "member2")})
	if !slices.Equal(d.Serving, []string{"member2"}) {
		t.Fatalf("serving %v, want member2 (api has no endpoints on member1)", d.Serving)
	}
	if c := d.Status.Clusters[1]; c.ReadyEndpoints == nil || *c.ReadyEndpoints != 1 {
		t.Fatalf("member2 reports the least count, 1: %+v", c)
	}
}

func TestDecideFailoverOrder(t *testing.T) {
	counts := map[string]int32{"a1": 1, "a2": 1, "b1": 1, "c1": 1}
	rb := func(counts map[string]int32) *workv1alpha1.ResourceBinding {
		return withEndpoints(binding(map[string]string{"a1": lb("10.0.1.1"), "a2": lb("10.0.1.2"), "b1": lb("10.0.2.1"), "c1": lb("10.0.3.1")}), counts)
	}
	s := spec("web")
	s.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, FailoverOrder: []networkingv1alpha1.FailoverGroup{
		{AffinityName: "a", ClusterNames: []string{"a1", "a2"}},
		{AffinityName: "b", ClusterNames: []string{"b1", "a1"}}, // a1 is in "a" already
	}}
	clusters := readyClusters("a1", "a2", "b1", "c1")
	steps := []struct {
		down    []string
		serving []string
	}{
		{nil, []string{"a1", "a2"}},
		{[]string{"a1"}, []string{"a2"}},
		{[]string{"a1", "a2"}, []string{"b1"}},
		{[]string{"a1", "a2", "b1"}, []string{"c1"}},             // clusters in no group come last
		{[]string{"a1", "a2", "b1", "c1"}, []string{"a1", "a2"}}, // fail open keeps the order: the first group
	}
	for _, st := range steps {
		c := map[string]int32{}
		for k, v := range counts {
			c[k] = v
			if slices.Contains(st.down, k) {
				c[k] = 0
			}
		}
		d := Decide(s, Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb(c)}}, Clusters: clusters})
		if !slices.Equal(d.Serving, st.serving) {
			t.Fatalf("down %v: serving %v, want %v (%v)", st.down, d.Serving, st.serving, reasons(d))
		}
		if len(st.down) == 0 && reasons(d)["b1"] != networkingv1alpha1.TrafficReasonStandby {
			t.Fatalf("b1 is standby: %v", reasons(d))
		}
	}

	// primaryGeoTag: the region's clusters first, every other one next.
	s.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, PrimaryGeoTag: "eu"}
	clusters["b1"].Spec.Region = "eu"
	d := Decide(s, Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb(counts)}}, Clusters: clusters})
	if !slices.Equal(d.Serving, []string{"b1"}) {
		t.Fatalf("primaryGeoTag eu: serving %v", d.Serving)
	}
	c := map[string]int32{"a1": 1, "a2": 1, "b1": 0, "c1": 1}
	d = Decide(s, Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb(c)}}, Clusters: clusters})
	if !slices.Equal(d.Serving, []string{"a1", "a2", "c1"}) {
		t.Fatalf("primary down: serving %v", d.Serving)
	}
}

func TestDecideWeights(t *testing.T) {
	rb := withEndpoints(binding(map[string]string{"member1": lb("10.0.0.1"), "member2": lb("10.0.0.2"), "member3": lb("10.0.0.3")}),
		map[string]int32{"member1": 1, "member2": 1, "member3": 1})
	s := spec("web")
	s.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: map[string]int32{"member1": 70, "member2": 30, "member3": 0, "ghost": 50}}
	d := Decide(s, Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb}}, Clusters: readyClusters("member1", "member2", "member3")})
	if !slices.Equal(d.Serving, []string{"member1", "member2"}) || d.Status.Clusters[0].Weight != 70 || d.Status.Clusters[1].Weight != 30 {
		t.Fatalf("weights: %+v", d.Status.Clusters)
	}
	if reasons(d)["member3"] != networkingv1alpha1.TrafficReasonZeroWeight {
		t.Fatalf("member3 has weight 0: %v", reasons(d))
	}
	// The weighted ones down: the zero-weight one takes over rather than nothing.
	rb = withEndpoints(rb, map[string]int32{"member1": 0, "member2": 0})
	d = Decide(s, Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb}}, Clusters: readyClusters("member1", "member2", "member3")})
	if !slices.Equal(d.Serving, []string{"member3"}) || d.Status.Clusters[2].Weight != 1 {
		t.Fatalf("standby takes over: %+v", d.Status.Clusters)
	}
}

// TestDecideHostnameAndIPv6: hostname load balancers and IPv6 addresses
// reach the status per cluster.
func TestDecideHostnameAndIPv6(t *testing.T) {
	rb := withEndpoints(binding(map[string]string{"aws": `{"loadBalancer":{"ingress":[{"hostname":"abc.elb.amazonaws.com"}]}}`,
		"v6": lb("2001:db8::5")}), map[string]int32{"aws": 1, "v6": 1})
	d := Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb}}, Clusters: readyClusters("aws", "v6")})
	if got := d.Status.Clusters[0].Addresses; len(got) != 1 || got[0].Hostname != "abc.elb.amazonaws.com" {
		t.Fatalf("aws addresses %v", got)
	}
	if got := d.Status.Clusters[1].Addresses; len(got) != 1 || got[0].IP != "2001:db8::5" {
		t.Fatalf("v6 addresses %v", got)
	}
}

// TestDecideFailoverSelectors: failover groups select by labels, by
// fields and with exclude, as a policy's ClusterAffinityTerm does; a label
// selector that does not parse (only possible for an object stored before
// validation) selects nothing rather than everything.
func TestDecideFailoverSelectors(t *testing.T) {
	clusters := readyClusters("eu1", "eu2", "us1", "ap1")
	clusters["eu1"].Labels, clusters["eu2"].Labels = map[string]string{"tier": "gold"}, map[string]string{"tier": "gold"}
	clusters["us1"].Spec.Region, clusters["ap1"].Spec.Region = "us", "ap"
	rb := withEndpoints(binding(map[string]string{"eu1": lb("10.0.1.1"), "eu2": lb("10.0.1.2"), "us1": lb("10.0.2.1"), "ap1": lb("10.0.3.1")}),
		map[string]int32{"eu1": 1, "eu2": 1, "us1": 1, "ap1": 1})
	in := Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {rb}}, Clusters: clusters}
	for _, tc := range []struct {
		name    string
		groups  []networkingv1alpha1.FailoverGroup
		serving []string
	}{
		{"labels, exclude", []networkingv1alpha1.FailoverGroup{{AffinityName: "gold",
			LabelSelector:   &networkingv1alpha1.ClusterLabelSelector{MatchExpressions: []networkingv1alpha1.ClusterLabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}}},
			ExcludeClusters: []string{"eu2"}}}, []string{"eu1"}},
		{"match labels", []networkingv1alpha1.FailoverGroup{{AffinityName: "gold", LabelSelector: &networkingv1alpha1.ClusterLabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}},
			[]string{"eu1", "eu2"}},
		{"fields", []networkingv1alpha1.FailoverGroup{{AffinityName: "us", FieldSelector: &networkingv1alpha1.ClusterFieldSelector{
			MatchExpressions: []networkingv1alpha1.ClusterFieldSelectorRequirement{{Key: "region", Operator: "In", Values: []string{"us"}}}}}}, []string{"us1"}},
		{"invalid selector selects nothing: the implicit last group serves", []networkingv1alpha1.FailoverGroup{{AffinityName: "bad",
			LabelSelector: &networkingv1alpha1.ClusterLabelSelector{MatchExpressions: []networkingv1alpha1.ClusterLabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}}},
			[]string{"ap1", "eu1", "eu2", "us1"}},
	} {
		s := spec("web")
		s.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, FailoverOrder: tc.groups}
		if d := Decide(s, in); !slices.Equal(d.Serving, tc.serving) {
			t.Errorf("%s: serving %v, want %v (%v)", tc.name, d.Serving, tc.serving, reasons(d))
		}
	}
}
