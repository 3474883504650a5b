/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package dnsendpoint

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// publisher is one run of the controller (one hub's life).
type publisher struct {
	metrics *Metrics
	events  *record.FakeRecorder
	stop    func()
}

func startPublisher(t *testing.T, env *testenv.Env) *publisher {
	t.Helper()
	return startPublisherWith(t, env, Options{TTL: 5 * time.Second})
}

func startPublisherWith(t *testing.T, env *testenv.Env, opts Options) *publisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := flotillainformers.NewSharedInformerFactory(flotillaclient.NewForConfigOrDie(env.Config), 0)
	p := &publisher{metrics: NewMetrics(prometheus.NewRegistry()), events: record.NewFakeRecorder(100)}
	opts.Recorder, opts.Metrics = p.events, p.metrics
	c := NewController(dynamic.NewForConfigOrDie(env.Config), factory, opts)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	p.stop = func() { cancel(); <-done; factory.Shutdown() }
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			p.stop()
		}
	})
	return p
}

func (p *publisher) writes() float64 {
	var n float64
	for _, op := range []string{"create", "update", "delete"} {
		n += testutil.ToFloat64(p.metrics.Writes.WithLabelValues(op))
	}
	return n
}

func installCRD(t *testing.T, env *testenv.Env) {
	t.Helper()
	if err := env.ApplyFile(context.Background(), filepath.Join(env.Root, "manifests", "hub", "dns-endpoint", "externaldns.k8s.io_dnsendpoints.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DNSEndpoint API", func() (bool, error) {
		_, err := env.Kube.Discovery().ServerResourcesForGroupVersion(GVR.GroupVersion().String())
		return err == nil, nil
	})
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond() }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func setReady(t *testing.T, fc flotillaclient.Interface, name string, status metav1.ConditionStatus) {
	t.Helper()
	waitFor(t, name+" Ready="+string(status), func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c, err = fc.ClusterV1alpha1().Clusters().Create(context.Background(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: status, Reason: "Test"})
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// ingressWithStatus creates an ingress for hosts and records a traffic
// decision in its status, as the MCI controller would.
func ingressWithStatus(t *testing.T, fc flotillaclient.Interface, ns, name string, ips []string, hosts ...string) {
	t.Helper()
	ctx := context.Background()
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, h := range hosts {
		mci.Spec.Rules = append(mci.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	created, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(ctx, mci, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatusIPs(t, fc, created, ips)
}

func setStatusIPs(t *testing.T, fc flotillaclient.Interface, mci *networkingv1alpha1.MultiClusterIngress, ips []string) {
	t.Helper()
	waitFor(t, "status of "+mci.Name, func() (bool, error) {
		cur, err := fc.NetworkingV1alpha1().MultiClusterIngresses(mci.Namespace).Get(context.Background(), mci.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{"member1", "member2"}}}
		cur.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			cur.Status.LoadBalancer.Ingress = append(cur.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
		_, err = fc.NetworkingV1alpha1().MultiClusterIngresses(mci.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// published is a DNSEndpoint's "name type targets" lines, sorted; nil when
// there is none.
func published(t *testing.T, dyn dynamic.Interface, ns, name string) []string {
	t.Helper()
	u, err := dyn.Resource(GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	eps, err := endpointsOf(u)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, ep := range eps {
		out = append(out, ep.DNSName+" "+ep.RecordType+" "+strings.Join(ep.Targets, ","))
	}
	slices.Sort(out)
	return out
}

func waitPublished(t *testing.T, dyn dynamic.Interface, ns, name string, want []string) {
	t.Helper()
	var got []string
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = published(t, dyn, ns, name)
		return slices.Equal(got, want) && (got == nil) == (want == nil), nil
	}); err != nil {
		t.Fatalf("DNSEndpoint %s/%s: %q, want %q", ns, name, got, want)
	}
}

// The publisher against a real apiserver, with the faults a hub meets:
// several tenants claiming one host, a DNSEndpoint edited, deleted, or
// squatted by hand, a new hub starting while it sees no cluster Ready (it
// writes nothing), and an ingress deleted (its DNSEndpoint goes).
func TestPublisherFaults(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	installCRD(t, env)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady(t, fc, "member1", metav1.ConditionTrue)
	setReady(t, fc, "member2", metav1.ConditionTrue)

	// Squatted: team-c already has a DNSEndpoint "web" of its own.
	squat := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"endpoints": []any{
		map[string]any{"dnsName": "c.example.com", "recordType": "A", "targets": []any{"192.0.2.1"}}}}}}
	squat.SetGroupVersionKind(GVK)
	squat.SetNamespace("team-c")
	squat.SetName("web")
	if _, err := dyn.Resource(GVR).Namespace("team-c").Create(ctx, squat, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	hub := startPublisher(t, env)
	ingressWithStatus(t, fc, "team-a", "web", []string{"10.0.0.1", "2001:db8::1"}, "web.example.com", "*.apps.example.com")
	waitPublished(t, dyn, "team-a", "web", []string{"*.apps.example.com A 10.0.0.1", "*.apps.example.com AAAA 2001:db8::1",
		"web.example.com A 10.0.0.1", "web.example.com AAAA 2001:db8::1"})
	// team-b (newer) claims team-a's host and one of its own (spelled
	// canonically: the admission policy refuses other spellings).
	ingressWithStatus(t, fc, "team-b", "web", []string{"10.0.9.9"}, "web.example.com", "b.example.com")
	waitPublished(t, dyn, "team-b", "web", []string{"b.example.com A 10.0.9.9"})
	ingressWithStatus(t, fc, "team-c", "web", []string{"10.0.3.3"}, "c.example.com")
	waitFor(t, "a DNSEndpointConflict event", func() (bool, error) {
		select {
		case e := <-hub.events.Events:
			return strings.Contains(e, EventConflict), nil
		default:
			return false, nil
		}
	})
	if got := published(t, dyn, "team-c", "web"); !slices.Equal(got, []string{"c.example.com A 192.0.2.1"}) {
		t.Fatalf("the squatter's DNSEndpoint was changed: %q", got)
	}

	// Edited by hand: put back. Deleted by hand: created again.
	u, err := dyn.Resource(GVR).Namespace("team-a").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"dnsName": "web.example.com", "recordType": "A", "targets": []any{"192.0.2.66"}}}, "spec", "endpoints"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(GVR).Namespace("team-a").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"*.apps.example.com A 10.0.0.1", "*.apps.example.com AAAA 2001:db8::1", "web.example.com A 10.0.0.1", "web.example.com AAAA 2001:db8::1"}
	waitPublished(t, dyn, "team-a", "web", want)
	if err := dyn.Resource(GVR).Namespace("team-a").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, dyn, "team-a", "web", want)

	// The hub goes; the fleet and a decision change while it is away; a new
	// hub starts seeing no cluster Ready: it writes nothing.
	hub.stop()
	setReady(t, fc, "member1", metav1.ConditionUnknown)
	setReady(t, fc, "member2", metav1.ConditionUnknown)
	a, err := fc.NetworkingV1alpha1().MultiClusterIngresses("team-a").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatusIPs(t, fc, a, []string{"10.0.0.1", "10.0.0.2"}) // the fail-open guess
	hub = startPublisher(t, env)
	waitFor(t, "the new hub holding every ingress", func() (bool, error) {
		return testutil.ToFloat64(hub.metrics.HeldIngresses) >= 2, nil
	})
	time.Sleep(time.Second) // a write, if any, would follow the hold within the same sync
	if n := hub.writes(); n != 0 {
		t.Fatalf("a hub that sees no cluster Ready wrote %v DNSEndpoints", n)
	}
	if got := published(t, dyn, "team-a", "web"); !slices.Equal(got, want) {
		t.Fatalf("held DNSEndpoint changed: %q", got)
	}
	// A cluster Ready again: the decision is published.
	setReady(t, fc, "member1", metav1.ConditionTrue)
	waitPublished(t, dyn, "team-a", "web", []string{"*.apps.example.com A 10.0.0.1,10.0.0.2", "web.example.com A 10.0.0.1,10.0.0.2"})

	// The owner goes: its DNSEndpoint goes, and the host passes to team-b.
	if err := fc.NetworkingV1alpha1().MultiClusterIngresses("team-a").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, dyn, "team-a", "web", nil)
	waitPublished(t, dyn, "team-b", "web", []string{"b.example.com A 10.0.9.9", "web.example.com A 10.0.9.9"})
}

// setStatusClusters records a per-cluster traffic decision in an
// ingress's status, as the MCI controller would.
func setStatusClusters(t *testing.T, fc flotillaclient.Interface, ns, name string, clusters ...networkingv1alpha1.ClusterTraffic) {
	t.Helper()
	waitFor(t, "status of "+name, func() (bool, error) {
		cur, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{"member1", "member2"}}}
		cur.Status.Clusters = clusters
		cur.Status.LoadBalancer.Ingress = nil
		for _, c := range clusters {
			cur.Status.LoadBalancer.Ingress = append(cur.Status.LoadBalancer.Ingress, c.Addresses...)
		}
		_, err = fc.NetworkingV1alpha1().MultiClusterIngresses(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func clusterTraffic(name, reason, ip string) networkingv1alpha1.ClusterTraffic {
	ct := networkingv1alpha1.ClusterTraffic{Name: name, Reason: reason, ReadyEndpoints: ptrTo[int32](3)}
	if reason == networkingv1alpha1.TrafficReasonHealthy || reason == networkingv1alpha1.TrafficReasonFailOpen {
		ct.Serving, ct.Weight = true, 1
		ct.Addresses = []networkingv1.IngressLoadBalancerIngress{{IP: ip}}
	}
	return ct
}

// The fleet comes back while the ingress's status still records the
// fail-open decision made when the hub saw no cluster Ready: the publisher
// must not publish that guess in the moment before the MCI controller
// decides again (it did, and an end-to-end run caught ExternalDNS
// publishing it). It holds the last records until the new decision, or
// for at most DecisionSettle when none comes (a real fail-open).
func TestPublisherHoldsAStaleFailOpen(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	installCRD(t, env)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setReady(t, fc, "member1", metav1.ConditionTrue)
	setReady(t, fc, "member2", metav1.ConditionFalse)
	const settle = 3 * time.Second
	hub := startPublisherWith(t, env, Options{TTL: 5 * time.Second, DecisionSettle: settle})
	ingressWithStatus(t, fc, "team-a", "web", nil, "web.example.com")
	setStatusClusters(t, fc, "team-a", "web", clusterTraffic("member1", networkingv1alpha1.TrafficReasonHealthy, "10.0.0.1"),
		clusterTraffic("member2", networkingv1alpha1.TrafficReasonClusterNotReady, ""))
	waitPublished(t, dyn, "team-a", "web", []string{"web.example.com A 10.0.0.1"})

	// The hub goes blind; the decision fails open to both; held.
	setReady(t, fc, "member1", metav1.ConditionUnknown)
	setStatusClusters(t, fc, "team-a", "web", clusterTraffic("member1", networkingv1alpha1.TrafficReasonFailOpen, "10.0.0.1"),
		clusterTraffic("member2", networkingv1alpha1.TrafficReasonFailOpen, "10.0.0.2"))
	waitFor(t, "the hold", func() (bool, error) { return testutil.ToFloat64(hub.metrics.HeldIngresses) == 1, nil })

	// member2 comes back; the status still records the blind decision.
	back := time.Now()
	setReady(t, fc, "member2", metav1.ConditionTrue)
	for time.Since(back) < settle/2 {
		if got := published(t, dyn, "team-a", "web"); !slices.Equal(got, []string{"web.example.com A 10.0.0.1"}) {
			t.Fatalf("%s after member2 came back, with the fail-open decision not made again: published %q", time.Since(back), got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := testutil.ToFloat64(hub.metrics.HeldIngresses); n != 1 {
		t.Fatalf("held ingresses %v while the decision is stale, want 1", n)
	}
	// No new decision within the bound: it is a real fail-open, published.
	waitPublished(t, dyn, "team-a", "web", []string{"web.example.com A 10.0.0.1,10.0.0.2"})
	if waited := time.Since(back); waited < settle {
		t.Fatalf("the stale decision was published after %s, before the %s bound", waited, settle)
	}
	// The MCI controller decides again: published at once.
	setStatusClusters(t, fc, "team-a", "web", clusterTraffic("member1", networkingv1alpha1.TrafficReasonClusterNotReady, ""),
		clusterTraffic("member2", networkingv1alpha1.TrafficReasonHealthy, "10.0.0.2"))
	waitPublished(t, dyn, "team-a", "web", []string{"web.example.com A 10.0.0.2"})
	if n := testutil.ToFloat64(hub.metrics.HeldIngresses); n != 0 {
		t.Fatalf("held ingresses %v after the decision was made again", n)
	}
}
