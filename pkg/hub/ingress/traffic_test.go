package ingress

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

func spec(services ...string) *networkingv1alpha1.MultiClusterIngressSpec {
	s := &networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com",
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}}}}
	for _, svc := range services {
		s.Rules[0].HTTP.Paths = append(s.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{Path: "/" + svc,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}})
	}
	return s
}

func binding(clusters map[string]string) *workv1alpha1.ResourceBinding {
	rb := &workv1alpha1.ResourceBinding{}
	for _, c := range slices.Sorted(func(yield func(string) bool) {
		for k := range clusters {
			if !yield(k) {
				return
			}
		}
	}) {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha1.TargetCluster{Name: c})
		if clusters[c] != "" {
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha1.AggregatedStatusItem{ClusterName: c,
				Status: &runtime.RawExtension{Raw: []byte(clusters[c])}})
		}
	}
	return rb
}

func member(name string, ready metav1.ConditionStatus, actions ...string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: clusterv1alpha1.ClusterStatus{
		RemedyActions: actions, Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: ready}}}}
}

func lb(ips ...string) string {
	s := `{"loadBalancer":{"ingress":[`
	for i, ip := range ips {
		if i > 0 {
			s += ","
		}
		s += `{"ip":"` + ip + `"}`
	}
	return s + `]}}`
}

func addresses(d Decision) []string {
	var out []string
	for _, in := range d.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return out
}

func TestBackendServices(t *testing.T) {
	s := spec("b", "a", "b")
	s.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "c"}}
	s.Rules = append(s.Rules, networkingv1.IngressRule{Host: "x"}) // no HTTP
	if got := BackendServices(&s.IngressSpec); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("BackendServices = %v", got)
	}
}

func TestDecide(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	web := binding(map[string]string{"member1": lb("10.0.0.1"), "member2": lb("10.0.0.2", "fd00::2"), "member3": ""})
	ready := map[string]*clusterv1alpha1.Cluster{
		"member1": member("member1", metav1.ConditionTrue), "member2": member("member2", metav1.ConditionTrue), "member3": member("member3", metav1.ConditionTrue)}

	d := Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}}, Clusters: ready, Now: now})
	if got := addresses(d); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2", "fd00::2"}) {
		t.Fatalf("all Ready: addresses %v", got)
	}
	if want := []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{"member1", "member2", "member3"}}}; !slices.EqualFunc(d.Status.ServiceLocations, want,
		func(a, b networkingv1alpha1.ServiceLocation) bool {
			return a.Name == b.Name && slices.Equal(a.Clusters, b.Clusters)
		}) {
		t.Fatalf("serviceLocations %v", d.Status.ServiceLocations)
	}
	if len(d.Status.TrafficBlockClusters) != 0 || d.FailOpen {
		t.Fatalf("nothing blocked expected: %+v", d)
	}

	// member1 blocked by TrafficControl, member2 not Ready.
	clusters := map[string]*clusterv1alpha1.Cluster{
		"member1": member("member1", metav1.ConditionTrue, "TrafficControl"), "member2": member("member2", metav1.ConditionUnknown), "member3": ready["member3"]}
	d = Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}}, Clusters: clusters, Now: now})
	if got := addresses(d); len(got) != 0 || !slices.Equal(d.Serving, []string{"member3"}) {
		t.Fatalf("only member3 (no address yet) serves: %v %v", got, d.Serving)
	}
	if len(d.Status.TrafficBlockClusters) != 1 || d.Status.TrafficBlockClusters[0].Name != "member1" || !d.Status.TrafficBlockClusters[0].BlockingTimestamp.Equal(&now) {
		t.Fatalf("member1 blocked now: %+v", d.Status.TrafficBlockClusters)
	}

	// The block time survives later decisions.
	later := metav1.NewTime(now.Add(time.Minute))
	d = Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}}, Clusters: clusters, Now: later, Previous: &d.Status})
	if !d.Status.TrafficBlockClusters[0].BlockingTimestamp.Equal(&now) {
		t.Fatalf("block time moved: %v", d.Status.TrafficBlockClusters[0].BlockingTimestamp)
	}

	// Nobody Ready: the unblocked clusters are served (fail open), never the blocked one.
	clusters["member3"] = member("member3", metav1.ConditionUnknown)
	d = Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}}, Clusters: clusters, Now: now})
	if got := addresses(d); !d.FailOpen || !slices.Equal(got, []string{"10.0.0.2", "fd00::2"}) {
		t.Fatalf("fail open expected with member2's addresses: %v %v", d.FailOpen, got)
	}

	// Every cluster blocked: nothing is served.
	for _, n := range []string{"member1", "member2", "member3"} {
		clusters[n] = member(n, metav1.ConditionTrue, "TrafficControl")
	}
	d = Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {web}}, Clusters: clusters, Now: now})
	if len(d.Serving) != 0 || d.FailOpen || len(d.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("all blocked must serve nothing: %+v", d)
	}
}

func TestDecideGarbageAndUnplaced(t *testing.T) {
	bad := binding(map[string]string{"member1": `{"loadBalancer":{"ingress":"nope"}}`, "member2": `{"loadBalancer":{"ingress":[{"ip":"not-an-ip","hostname":"lb.example.com"},{"ip":"10.0.0.2"},{"ip":"10.0.0.2"}]}}`})
	clusters := map[string]*clusterv1alpha1.Cluster{"member1": member("member1", metav1.ConditionTrue), "member2": member("member2", metav1.ConditionTrue)}
	d := Decide(spec("web", "api"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {bad}}, Clusters: clusters})
	if got := addresses(d); !slices.Equal(got, []string{"10.0.0.2", "lb.example.com"}) {
		t.Fatalf("addresses %v", got)
	}
	if len(d.Status.ServiceLocations) != 2 || d.Status.ServiceLocations[0].Name != "api" || len(d.Status.ServiceLocations[0].Clusters) != 0 {
		t.Fatalf("an unplaced backend is listed with no clusters: %+v", d.Status.ServiceLocations)
	}
	// A cluster that no longer exists neither serves nor fails open.
	d = Decide(spec("web"), Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{"web": {bad}}, Clusters: map[string]*clusterv1alpha1.Cluster{}})
	if len(d.Serving) != 0 || d.FailOpen {
		t.Fatalf("unknown clusters serve: %+v", d)
	}
}

func TestDecideHostsAdmitted(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	later := metav1.NewTime(now.Add(time.Minute))
	owner := dnstraffic.IngressRef{Namespace: "team-a", Name: "web"}
	hosts := func(d Decision) metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(d.Status.Conditions, networkingv1alpha1.ConditionHostsAdmitted)
		if c == nil {
			t.Fatalf("no HostsAdmitted condition in %+v", d.Status.Conditions)
		}
		return *c
	}

	// No conflict: True, and another controller's condition is kept.
	other := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: now}
	prev := &networkingv1alpha1.MultiClusterIngressStatus{Conditions: []metav1.Condition{other}}
	d := Decide(spec("web"), Inputs{Previous: prev, Now: now, Generation: 3})
	if c := hosts(d); c.Status != metav1.ConditionTrue || c.Reason != networkingv1alpha1.ReasonHostsAdmitted || c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&now) {
		t.Fatalf("admitted: %+v", c)
	}
	if meta.FindStatusCondition(d.Status.Conditions, "Other") == nil {
		t.Fatalf("other condition dropped: %+v", d.Status.Conditions)
	}
	if len(prev.Conditions) != 1 {
		t.Fatalf("Decide wrote into the previous status: %+v", prev.Conditions)
	}

	// An older ingress owns the host: False, HostConflict, naming host and owner.
	conflict := []dnstraffic.HostConflict{{Host: "web.example.com", Owner: owner}, {Host: "*.example.com", Owner: dnstraffic.IngressRef{Namespace: "team-c", Name: "wild"}}}
	d = Decide(spec("web"), Inputs{Previous: &d.Status, Now: later, Generation: 3, HostConflicts: conflict})
	c := hosts(d)
	if c.Status != metav1.ConditionFalse || c.Reason != networkingv1alpha1.ReasonHostConflict || !c.LastTransitionTime.Equal(&later) {
		t.Fatalf("conflict: %+v", c)
	}
	for _, want := range []string{"web.example.com (owner team-a/web)", "*.example.com (owner team-c/wild)"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name %q", c.Message, want)
		}
	}
	// Unchanged: the transition time stays.
	d = Decide(spec("web"), Inputs{Previous: &d.Status, Now: metav1.NewTime(later.Add(time.Hour)), Generation: 3, HostConflicts: conflict})
	if c := hosts(d); !c.LastTransitionTime.Equal(&later) {
		t.Fatalf("transition time moved without a transition: %v", c.LastTransitionTime)
	}

	// Invalid hosts: False, InvalidHost; a conflict still wins the reason.
	d = Decide(spec("web"), Inputs{Now: now, InvalidHosts: []string{"web_1.example.com"}})
	if c := hosts(d); c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalidHost || !strings.Contains(c.Message, `"web_1.example.com"`) {
		t.Fatalf("invalid: %+v", c)
	}
	d = Decide(spec("web"), Inputs{Now: now, InvalidHosts: []string{"web_1.example.com"}, HostConflicts: conflict[:1]})
	if c := hosts(d); c.Reason != networkingv1alpha1.ReasonHostConflict || !strings.Contains(c.Message, "web_1") || !strings.Contains(c.Message, "team-a/web") {
		t.Fatalf("conflict and invalid: %+v", c)
	}

	// A host the namespace may not claim: False, HostNotAllowed, naming the
	// host and the rule's domain; it wins the reason over a conflict, and
	// the message still names every lost host.
	notAllowed := []dnstraffic.HostNotAllowed{{Host: "pay.example.com", Domain: "example.com"}}
	d = Decide(spec("web"), Inputs{Now: now, HostsNotAllowed: notAllowed, HostConflicts: conflict[:1], InvalidHosts: []string{"web_1.example.com"}})
	c = hosts(d)
	if c.Status != metav1.ConditionFalse || c.Reason != networkingv1alpha1.ReasonHostNotAllowed {
		t.Fatalf("not allowed: %+v", c)
	}
	for _, want := range []string{"pay.example.com (within example.com)", "--ingress-host-namespaces", "web.example.com (owner team-a/web)", `"web_1.example.com"`} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name %q", c.Message, want)
		}
	}
}

func TestHostsAdmittedMessageIsBounded(t *testing.T) {
	var many []dnstraffic.HostConflict
	for i := range 1000 {
		many = append(many, dnstraffic.HostConflict{Host: fmt.Sprintf("h%04d.example.com", i), Owner: dnstraffic.IngressRef{Namespace: "team-a", Name: "web"}})
	}
	c := HostsAdmitted(nil, many, nil)
	if !strings.Contains(c.Message, "h0000.example.com (owner team-a/web)") || !strings.Contains(c.Message, "and 990 more") || strings.Contains(c.Message, "h0010") {
		t.Fatalf("message %q", c.Message)
	}
	if len(c.Message) > 1024 {
		t.Fatalf("message of %d bytes", len(c.Message))
	}
	// Invalid hosts are any string the tenant wrote: quoted, cut short.
	var huge []string
	for i := range 20 {
		huge = append(huge, fmt.Sprintf("%d%s", i, strings.Repeat("é", 100000)))
	}
	c = HostsAdmitted(nil, many, huge)
	if len(c.Message) > 4096 || !strings.Contains(c.Message, "(and 10 more)") {
		t.Fatalf("message of %d bytes: %.300q", len(c.Message), c.Message)
	}
}
