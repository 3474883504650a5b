package app_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	ingressctl "github.com/flotilla-io/flotilla/pkg/hub/ingress"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const webService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
"spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[{"port":80}]}}`

// Remedies and MultiClusterIngress traffic against a real apiserver with
// the whole hub running: a Remedy matching a cluster condition (any type)
// sets and clears Cluster.status.remedyActions, a Remedy without decision
// matches acts at once, deleting a Remedy clears its actions, and a
// MultiClusterIngress follows: where its backend runs, which clusters are
// blocked, and the addresses of the rest.
func TestRemedyTrafficControl(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	dnsAddr = freeUDPAndTCPAddr(t)
	ctx, fc := startHubWith(t, func(o *app.Options) {
		// No agents here: keep the hand-written Ready from turning Unknown.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.DNSTrafficAddress = dnsAddr
	})
	ns := "default"
	startWebTraffic(t, ctx, fc, ns)

	dnsRemedy := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "dns-broken"}, Spec: remedyv1alpha1.RemedySpec{
		DecisionMatches: []remedyv1alpha1.DecisionMatch{{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
			ConditionType: remedyv1alpha1.ServiceDomainNameResolutionReady, Operator: remedyv1alpha1.ClusterConditionEqual, ConditionStatus: "False"}}},
		Actions: []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
	if _, err := fc.RemedyV1alpha1().Remedies().Create(ctx, dnsRemedy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// member1's DNS breaks: its traffic is blocked.
	setConditions(t, fc, "member1", map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady: metav1.ConditionFalse})
	waitActions(t, fc, "member1", "TrafficControl")
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, []string{"member1"}, []string{"10.0.2.1"})
	// The Remedy is deleted while DNS is still broken: the block goes.
	if err := fc.RemedyV1alpha1().Remedies().Delete(ctx, dnsRemedy.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActions(t, fc, "member1")
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, nil, []string{"10.0.1.1", "10.0.2.1"})
	// Back, then DNS repaired: cleared.
	if _, err := fc.RemedyV1alpha1().Remedies().Create(ctx, dnsRemedy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActions(t, fc, "member1", "TrafficControl")
	setConditions(t, fc, "member1", map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady: metav1.ConditionTrue})
	waitActions(t, fc, "member1")

	// An upgrade: a Remedy with no decision matches acts at once, on the
	// clusters it names only, and stops when deleted.
	upgrade := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-member2"}, Spec: remedyv1alpha1.RemedySpec{
		ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}},
		Actions:         []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
	if _, err := fc.RemedyV1alpha1().Remedies().Create(ctx, upgrade, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActions(t, fc, "member2", "TrafficControl")
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, []string{"member2"}, []string{"10.0.1.1"})
	if got := actionsOf(t, fc, "member1"); len(got) != 0 {
		t.Fatalf("member1 got %v from a Remedy for member2", got)
	}
	// A cluster that is not Ready stops getting traffic as well.
	setConditions(t, fc, "member1", map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionFalse})
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, []string{"member2"}, []string{"10.0.1.1"}) // fail open: nothing else is left
	setConditions(t, fc, "member1", map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue})
	if err := fc.RemedyV1alpha1().Remedies().Delete(ctx, upgrade.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitActions(t, fc, "member2")
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, nil, []string{"10.0.1.1", "10.0.2.1"})
	setConditions(t, fc, "member2", map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionFalse})
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, nil, []string{"10.0.1.1"})
}

// startWebTraffic makes Ready clusters member1 (10.0.1.1) and member2
// (10.0.2.1) running the Service "web" in ns behind the MultiClusterIngress
// "web" for web.example.com, and waits until both get its traffic.
func startWebTraffic(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string) {
	t.Helper()
	addrs := map[string]string{"member1": "10.0.1.1", "member2": "10.0.2.1"}
	for _, name := range []string{"member1", "member2"} {
		c, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setConditions(t, fc, c.Name, map[string]metav1.ConditionStatus{
			clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady: metav1.ConditionTrue})
	}

	createWebService(t, ctx, fc, ns)
	binding := workobjects.BindingName("Service", "web")
	for cluster, ip := range addrs {
		w := waitWork(t, fc, cluster, ns, binding, func(*unstructured.Unstructured) bool { return true })
		// What the agent reports once a cloud load balancer fronts the Service.
		reportStatus(t, fc, w, workv1alpha1.ResourceIdentifier{Version: "v1", Kind: "Service", Namespace: ns, Name: "web"},
			fmt.Sprintf(`{"loadBalancer":{"ingress":[{"ip":%q}]}}`, ip))
	}

	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}}
	if _, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(ctx, mci, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTraffic(t, fc, ns, "web", []string{"member1", "member2"}, nil, []string{"10.0.1.1", "10.0.2.1"})
}

func ptrTo[T any](v T) *T { return &v }

// dnsAddr is where the hub under test runs its DNS traffic manager.
var dnsAddr string

// resolve asks the hub's DNS traffic manager for name's A records, sorted.
func resolve(t *testing.T, name string) []string {
	t.Helper()
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	reply, _, err := new(dns.Client).Exchange(msg, dnsAddr)
	if err != nil || reply.Rcode != dns.RcodeSuccess {
		return []string{fmt.Sprintf("error %v rcode %d", err, rcodeOf(reply))}
	}
	var ips []string
	for _, rr := range reply.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips
}

func rcodeOf(m *dns.Msg) int {
	if m == nil {
		return -1
	}
	return m.Rcode
}

// freeUDPAndTCPAddr returns a loopback address whose port is free for both
// UDP and TCP right now.
func freeUDPAndTCPAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		_ = l.Close()
		if err == nil {
			_ = pc.Close()
			return addr
		}
	}
	t.Fatal("no free port for both UDP and TCP")
	return ""
}

// setConditions writes condition statuses as the agent would.
func setConditions(t *testing.T, fc flotillaclient.Interface, cluster string, conds map[string]metav1.ConditionStatus) {
	t.Helper()
	waitUntil(t, "conditions of "+cluster+" written", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for typ, status := range conds {
			meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: "Test", Message: "set by the test"})
		}
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func actionsOf(t *testing.T, fc flotillaclient.Interface, cluster string) []string {
	t.Helper()
	c, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), cluster, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Status.RemedyActions
}

func waitActions(t *testing.T, fc flotillaclient.Interface, cluster string, want ...string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("remedy actions of %s = %v", cluster, want), func() (bool, error) {
		return slices.Equal(actionsOf(t, fc, cluster), want), nil
	})
}

// waitTraffic waits for the ingress status: its backend's clusters, the
// blocked ones and the served IPs.
func waitTraffic(t *testing.T, fc flotillaclient.Interface, ns, name string, placed, blocked, ips []string) {
	t.Helper()
	var last networkingv1alpha1.MultiClusterIngressStatus
	err := func() error {
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			mci, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			last = mci.Status
			var gotBlocked, gotIPs []string
			for _, b := range last.TrafficBlockClusters {
				gotBlocked = append(gotBlocked, b.Name)
			}
			for _, in := range last.LoadBalancer.Ingress {
				gotIPs = append(gotIPs, in.IP)
			}
			if len(last.ServiceLocations) == 1 && slices.Equal(last.ServiceLocations[0].Clusters, placed) &&
				slices.Equal(gotBlocked, blocked) && slices.Equal(gotIPs, ips) && slices.Equal(resolve(t, "web.example.com"), ips) {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("timed out")
	}()
	if err != nil {
		t.Fatalf("ingress %s/%s: want placed %v blocked %v addresses %v; last status %+v: %v", ns, name, placed, blocked, ips, last, err)
	}
}

// reportStatus writes what an agent writes after applying the Work's one
// manifest whose status is status.
func reportStatus(t *testing.T, fc flotillaclient.Interface, w *workv1alpha1.Work, id workv1alpha1.ResourceIdentifier, status string) {
	t.Helper()
	waitUntil(t, "Work status written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(context.Background(), w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{Identifier: id,
			Status: &runtime.RawExtension{Raw: []byte(status)}, Health: workv1alpha1.ResourceHealthy}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// One owner per DNS name, with the whole hub and its DNS traffic manager
// on a real apiserver: the oldest MultiClusterIngress owns a host, so a
// newer one in another namespace (spelling the host differently, with any
// number of trailing dots, and sending a forged creationTimestamp) adds
// nothing to its answers and is told who owns it; a wildcard, older or not,
// never captures an exact host owned elsewhere; a namespace that
// --ingress-host-namespaces does not allow a domain never owns a host in it,
// even claiming it first; deleting the owner hands the host to the
// next-oldest, and re-creating it does not win it back. The admission
// policy that refuses non-canonical hosts is unbound: the hub must decide
// right on its own, for objects stored before the rule.
func TestDNSHostOwnership(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	dnsAddr = freeUDPAndTCPAddr(t)
	var kubeconfig string
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.DNSTrafficAddress = dnsAddr
		o.IngressHostNamespaces = []string{"shop.example.com=team-a"}
		kubeconfig = o.Kubeconfig
	})
	unbindIngressHostsPolicy(t, env)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, name := range []string{"member1", "member2"} {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setConditions(t, fc, name, map[string]metav1.ConditionStatus{clusterv1alpha1.ClusterConditionReady: metav1.ConditionTrue})
	}
	// Each team runs Service web on one cluster, behind its own load balancer.
	teams := []struct{ ns, cluster, ip string }{{"team-a", "member1", "10.0.1.1"}, {"team-b", "member2", "10.0.2.2"}, {"team-c", "member2", "10.0.2.3"}}
	for _, ns := range []string{"team-a", "team-b", "team-c", "team-d"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tm := range teams {
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tm.ns},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(webService)}}}}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(tm.ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tm.ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{tm.cluster}}},
			}}
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(tm.ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w := waitWork(t, fc, tm.cluster, tm.ns, workobjects.BindingName("Service", "web"), func(*unstructured.Unstructured) bool { return true })
		reportStatus(t, fc, w, workv1alpha1.ResourceIdentifier{Version: "v1", Kind: "Service", Namespace: tm.ns, Name: "web"},
			fmt.Sprintf(`{"loadBalancer":{"ingress":[{"ip":%q}]}}`, tm.ip))
	}
	ingress := func(ns, name string, hosts ...string) *networkingv1alpha1.MultiClusterIngress {
		mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		for _, h := range hosts {
			mci.Spec.Rules = append(mci.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}})
		}
		return mci
	}
	var lastCreated time.Time
	create := func(mci *networkingv1alpha1.MultiClusterIngress) {
		t.Helper()
		got, err := fc.NetworkingV1alpha1().MultiClusterIngresses(mci.Namespace).Create(ctx, mci, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lastCreated = got.CreationTimestamp.Time
	}
	// creationTimestamp has one-second resolution (equal ones go by
	// namespace/name): let the clock pass the last one so the next
	// ingress is strictly newer.
	nextSecond := func() { time.Sleep(time.Until(lastCreated.Add(time.Second + 50*time.Millisecond))) }

	// team-c's wildcard first: it is the oldest ingress of all.
	create(ingress("team-c", "wild", "*.example.com"))
	waitDNS(t, "x.example.com", "10.0.2.3")
	nextSecond()
	create(ingress("team-a", "web", "web.example.com"))
	waitHostsAdmitted(t, fc, "team-a", "web", metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted)
	waitDNS(t, "web.example.com", "10.0.1.1")
	nextSecond()
	// team-b claims team-a's host in another spelling (two trailing dots),
	// with a made-up old creation time (the apiserver ignores it), and a
	// host of its own.
	hostile := ingress("team-b", "web", "WEB.Example.com..", "b.example.com")
	hostile.CreationTimestamp = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	create(hostile)
	// A second wildcard over the same suffix.
	create(ingress("team-d", "wild", "*.EXAMPLE.com"))

	cond := waitHostsAdmitted(t, fc, "team-b", "web", metav1.ConditionFalse, networkingv1alpha1.ReasonHostConflict)
	if !strings.HasSuffix(cond.Message, ": web.example.com (owner team-a/web)") {
		t.Fatalf("team-b's condition must name web.example.com and its owner team-a/web, and nothing else: %q", cond.Message)
	}
	cond = waitHostsAdmitted(t, fc, "team-d", "wild", metav1.ConditionFalse, networkingv1alpha1.ReasonHostConflict)
	if !strings.Contains(cond.Message, "team-c/wild") || !strings.Contains(cond.Message, "*.example.com") {
		t.Fatalf("team-d's condition must name team-c/wild and *.example.com: %q", cond.Message)
	}
	waitEvent(t, kube, "team-b", "web", corev1.EventTypeWarning, ingressctl.EventHostConflict, "team-a/web")
	// The DNS server has team-b's address (its own host answers with it)...
	waitDNS(t, "b.example.com", "10.0.2.2")
	// ...and still serves team-a's alone for team-a's host, in any spelling;
	// neither wildcard captures it, and the older wildcard keeps the rest.
	for _, name := range []string{"web.example.com", "WEB.EXAMPLE.COM"} {
		if got := resolve(t, name); !slices.Equal(got, []string{"10.0.1.1"}) {
			t.Fatalf("%s answers %v, want team-a's 10.0.1.1 only", name, got)
		}
	}
	if got := resolve(t, "x.example.com"); !slices.Equal(got, []string{"10.0.2.3"}) {
		t.Fatalf("x.example.com answers %v, want team-c's 10.0.2.3 only", got)
	}
	// ANY gets one RRset (RFC 8482), and the owner's at that.
	anyQ := new(dns.Msg)
	anyQ.SetQuestion("web.example.com.", dns.TypeANY)
	reply, _, err := new(dns.Client).Exchange(anyQ, dnsAddr)
	if err != nil || reply.Rcode != dns.RcodeSuccess || len(reply.Answer) != 1 || reply.Answer[0].String() != "web.example.com.\t5\tIN\tA\t10.0.1.1" {
		t.Fatalf("ANY web.example.com: %v %v", err, reply)
	}
	waitHostsAdmitted(t, fc, "team-a", "web", metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted)
	waitHostsAdmitted(t, fc, "team-c", "wild", metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted)

	// Only team-a may claim shop.example.com: team-b's claim, older, is
	// never served and keeps nobody from owning it; until team-a claims it,
	// the name does not exist and the oldest wildcard answers it.
	create(ingress("team-b", "shop", "shop.example.com"))
	cond = waitHostsAdmitted(t, fc, "team-b", "shop", metav1.ConditionFalse, networkingv1alpha1.ReasonHostNotAllowed)
	if !strings.Contains(cond.Message, "shop.example.com (within shop.example.com)") {
		t.Fatalf("team-b's condition must name shop.example.com and the rule's domain: %q", cond.Message)
	}
	waitEvent(t, kube, "team-b", "shop", corev1.EventTypeWarning, ingressctl.EventHostNotAllowed, "shop.example.com")
	waitDNS(t, "shop.example.com", "10.0.2.3")
	nextSecond()
	create(ingress("team-a", "shop", "shop.example.com"))
	waitHostsAdmitted(t, fc, "team-a", "shop", metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted)
	waitDNS(t, "shop.example.com", "10.0.1.1")
	waitHostsAdmitted(t, fc, "team-b", "shop", metav1.ConditionFalse, networkingv1alpha1.ReasonHostNotAllowed)

	// The owner goes: the next-oldest claimant takes the host over.
	if err := fc.NetworkingV1alpha1().MultiClusterIngresses("team-a").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDNS(t, "web.example.com", "10.0.2.2")
	waitHostsAdmitted(t, fc, "team-b", "web", metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted)
	waitEvent(t, kube, "team-b", "web", corev1.EventTypeNormal, ingressctl.EventHostsAdmitted, "")

	// Re-created, team-a's ingress is the newest claimant: it does not win
	// the host back.
	nextSecond()
	create(ingress("team-a", "web", "web.example.com"))
	cond = waitHostsAdmitted(t, fc, "team-a", "web", metav1.ConditionFalse, networkingv1alpha1.ReasonHostConflict)
	if !strings.Contains(cond.Message, "team-b/web") {
		t.Fatalf("re-created team-a's condition must name team-b/web: %q", cond.Message)
	}
	waitDNS(t, "web.example.com", "10.0.2.2")
	if got := resolve(t, "web.example.com"); !slices.Equal(got, []string{"10.0.2.2"}) {
		t.Fatalf("web.example.com answers %v after team-a came back, want team-b's only", got)
	}
}

// unbindIngressHostsPolicy deletes the binding of the admission policy
// flotilla-ingress-hosts and waits until a host it refuses is accepted, as
// for objects stored before the policy existed.
func unbindIngressHostsPolicy(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	if err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "flotilla-ingress-hosts", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	probe := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "WEB.example.com.."}}}}}
	waitUntil(t, "the ingress-hosts policy unbound", func() (bool, error) {
		return mcisCreateDryRun(ctx, fc.NetworkingV1alpha1().MultiClusterIngresses("default"), probe) == nil, nil
	})
}

// waitDNS waits until the hub's DNS traffic manager answers name with
// exactly ips.
func waitDNS(t *testing.T, name string, ips ...string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		last = resolve(t, name)
		return slices.Equal(last, ips), nil
	})
	if err != nil {
		t.Fatalf("%s: want answers %v, last %v: %v", name, ips, last, err)
	}
}

// waitHostsAdmitted waits for an ingress's HostsAdmitted condition to have
// status and reason for its current generation, and returns it.
func waitHostsAdmitted(t *testing.T, fc flotillaclient.Interface, ns, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		mci, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = meta.FindStatusCondition(mci.Status.Conditions, networkingv1alpha1.ConditionHostsAdmitted)
		return last != nil && last.Status == status && last.Reason == reason && last.ObservedGeneration == mci.Generation, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: want HostsAdmitted %s/%s, last %+v: %v", ns, name, status, reason, last, err)
	}
	return *last
}

// waitEvent waits for an event about the ingress ns/name of type and
// reason whose message contains msg.
func waitEvent(t *testing.T, kube kubernetes.Interface, ns, name, typ, reason, msg string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s event %s on %s/%s", typ, reason, ns, name), func() (bool, error) {
		events, err := kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.namespace": ns, "involvedObject.name": name, "reason": reason}.String()})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Type == typ && e.InvolvedObject.Kind == "MultiClusterIngress" && strings.Contains(e.Message, msg) {
				return true, nil
			}
		}
		return false, nil
	})
}

// An ingress is as old as its hosts: the admission policy refuses an update
// that adds a host (exact or wildcard), so a tenant with an old
// MultiClusterIngress cannot edit it to take a newer ingress's host. It may
// drop hosts and change anything else, and the hub's status writes are not
// affected. And a host is written in its canonical form only
// (hostnames.Canonical), on create and update, with what is wrong said: an
// object stored before that rule keeps its spelling through updates, and
// may respell a host to the canonical form.
func TestMultiClusterIngressCannotAddHosts(t *testing.T) {
	// Not parallel: the traffic tests share the package-level dnsAddr.
	env := testenv.Start(t)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	mcis := fc.NetworkingV1alpha1().MultiClusterIngresses("default")
	rule := func(host, svc string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}
	}
	newIngress := func(name string, rules ...networkingv1.IngressRule) *networkingv1alpha1.MultiClusterIngress {
		return &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: rules}}}
	}
	// Stored before the canonical-host rule: created while the policy is
	// not bound.
	bindings := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	binding, err := bindings.Get(ctx, "flotilla-ingress-hosts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var legacy *networkingv1alpha1.MultiClusterIngress
	waitUntil(t, "the ingress-hosts policy unbound", func() (bool, error) {
		legacy, err = mcis.Create(ctx, newIngress("legacy", rule("WEB.Legacy.example.com..", "web"), rule("api.legacy.example.com", "api")), metav1.CreateOptions{})
		return err == nil, nil
	})
	binding.ResourceVersion = ""
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	old, err := mcis.Create(ctx, newIngress("old", rule("web.example.com", "web"), rule("api.example.com", "api")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(name string, dryRun bool, rules ...networkingv1.IngressRule) error {
		cur, err := mcis.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Rules = rules
		opts := metav1.UpdateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = mcis.Update(ctx, cur, opts)
		return err
	}
	// Policies take effect asynchronously: probe with a dry run.
	waitUntil(t, "the ingress-hosts policy to refuse a new host", func() (bool, error) {
		return apierrors.IsForbidden(update(old.Name, true, rule("web.example.com", "web"), rule("api.example.com", "api"), rule("probe.example.com", "web"))), nil
	})

	// Not canonical: refused at create, naming the host and the form.
	for host, why := range map[string]string{
		"WEB.example.com":                        "upper case",
		"web.example.com.":                       "a trailing dot",
		"web.example.com..":                      "two trailing dots",
		" web.example.com":                       "whitespace",
		"web_1.example.com":                      "an underscore",
		"-web.example.com":                       "a leading hyphen",
		"web..example.com":                       "an empty label",
		"a.*.example.com":                        "a wildcard inside",
		"bücher.example.com":                     "a U-label (punycode is xn--bcher-kva)",
		`w\101b.example.com`:                     "an escape",
		strings.Repeat("a", 64) + ".example.com": "a label of 64",
	} {
		err := mcisCreateDryRun(ctx, mcis, newIngress("new", rule(host, "web")))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a host is a DNS name in canonical form") {
			t.Errorf("creating a host with %s (%q): want Invalid saying what a host is, got %v", why, host, err)
		}
		if host == "web.example.com.." {
			t.Logf("refused: %v", err) // docs/dnstraffic.md shows it
		}
	}
	for _, host := range []string{"web.example.com", "*.example.com", "xn--bcher-kva.example.com", strings.Repeat("a", 63) + ".example.com"} {
		if err := mcisCreateDryRun(ctx, mcis, newIngress("new", rule(host, "web"))); err != nil {
			t.Errorf("creating canonical host %q: %v", host, err)
		}
	}

	for name, rules := range map[string][]networkingv1.IngressRule{
		"a new exact host": {rule("web.example.com", "web"), rule("api.example.com", "api"), rule("shop.example.com", "web")},
		"a new wildcard":   {rule("web.example.com", "web"), rule("*.example.com", "web")},
		"a host renamed":   {rule("web.example.com", "web"), rule("apl.example.com", "api")},
	} {
		err := update(old.Name, false, rules...)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot add a host after it is created") {
			t.Errorf("%s: want Forbidden naming the rule, got %v", name, err)
		}
	}
	for name, rules := range map[string][]networkingv1.IngressRule{
		"respelt, not canonical": {rule("WEB.Example.com.", "web"), rule("api.example.com", "api")},
		"a Unicode host":         {rule("web.example.com", "web"), rule("bücher.example.com", "web")},
	} {
		if err := update(old.Name, false, rules...); err == nil {
			t.Errorf("%s: allowed", name)
		}
	}
	// Another backend, a catch-all rule, dropping a host: allowed.
	if err := update(old.Name, false, rule("web.example.com", "web-v2"), rule("api.example.com", "api"), rule("", "catch-all")); err != nil {
		t.Fatalf("changing a backend, adding a catch-all rule: %v", err)
	}
	if err := update(old.Name, false, rule("web.example.com", "web")); err != nil {
		t.Fatalf("dropping a host: %v", err)
	}
	// Dropped is dropped: taking it back is adding it.
	if err := update(old.Name, false, rule("web.example.com", "web"), rule("api.example.com", "api")); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "api.example.com") {
		t.Fatalf("re-adding a dropped host: want Forbidden naming api.example.com, got %v", err)
	}
	// The object stored before the rule keeps its spelling through an
	// update, and may respell it canonically; not to another wrong form.
	if err := update(legacy.Name, false, rule("WEB.Legacy.example.com..", "web-v2"), rule("api.legacy.example.com", "api")); err != nil {
		t.Fatalf("updating a stored object, its host as stored: %v", err)
	}
	if err := update(legacy.Name, true, rule("WEB.LEGACY.example.com.", "web-v2")); !apierrors.IsInvalid(err) {
		t.Fatalf("respelling a stored host to another non-canonical form: want Invalid, got %v", err)
	}
	if err := update(legacy.Name, false, rule("web.legacy.example.com", "web-v2"), rule("api.legacy.example.com", "api")); err != nil {
		t.Fatalf("respelling a stored host canonically: %v", err)
	}
	// The hub's status writes go through the status subresource.
	cur, err := mcis.Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: networkingv1alpha1.ConditionHostsAdmitted, Status: metav1.ConditionTrue,
		Reason: networkingv1alpha1.ReasonHostsAdmitted, Message: "test"})
	if _, err := mcis.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status write: %v", err)
	}
}

// mcisCreateDryRun creates mci in a dry run.
func mcisCreateDryRun(ctx context.Context, mcis interface {
	Create(context.Context, *networkingv1alpha1.MultiClusterIngress, metav1.CreateOptions) (*networkingv1alpha1.MultiClusterIngress, error)
}, mci *networkingv1alpha1.MultiClusterIngress) error {
	_, err := mcis.Create(ctx, mci, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// createWebService creates the Service template "web" (webService) in ns
// and a policy placing it on member1 and member2.
func createWebService(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string) {
	t.Helper()
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(webService)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
