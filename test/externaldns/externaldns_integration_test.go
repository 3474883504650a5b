// Package externaldns tests the hub's DNSEndpoint publishing end to end:
// the hub (in process, as its shipped ServiceAccount with the shipped RBAC
// and admission policies) writes DNSEndpoints, a real ExternalDNS
// (bin/external-dns: its crd source and CoreDNS provider) writes them as
// SkyDNS records into an etcd of the test's own, and the project's CoreDNS
// (bin/coredns, etcd plugin) answers for them.
package externaldns

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/dnsendpoint"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

const (
	hubNamespace = "flotilla-system"
	hubAccount   = "flotilla-hub"
	tenant       = "team-a"
	host         = "web.example.com"
	webService   = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
"spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[{"port":80}]}}`
)

// The ExternalDNS path end to end: no tenant can publish through the
// hub's label or take another tenant's host; the records follow a
// failover, stay while the hub sees no cluster Ready (rather than the
// decision's fail-open guess), and stay when the hub is stopped while the
// fleet changes under it.
//
// Not parallel: ExternalDNS's CoreDNS provider reads ETCD_URLS from its
// environment, which the test sets with t.Setenv. The package has this
// test only.
func TestExternalDNSPublishesTheHubsTrafficAndFailsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs a real kube-apiserver, ExternalDNS, etcd and CoreDNS (run without -short)")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.AssetsDir(root)
	if _, err := os.Stat(filepath.Join(bin, "external-dns")); err != nil {
		t.Skipf("%s/external-dns not built: run hack/build-tools.sh external-dns", bin)
	}
	if out, err := exec.Command(filepath.Join(bin, "coredns"), "-plugins").Output(); err != nil || !slices.Contains(strings.Fields(string(out)), "etcd") {
		t.Fatalf("%s/coredns has no etcd plugin (%v): run hack/build-tools.sh coredns", bin, err)
	}
	start := time.Now()
	env := testenv.Start(t, testenv.WithAuditLog())
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	installHub(t, env)
	checkShippedCRD(t, root)

	etcdURL := startEtcd(t, bin)
	dnsAddr := startCoreDNS(t, bin, etcdURL)
	// ExternalDNS as its docs run it for the CoreDNS provider, publishing
	// only the hub's DNSEndpoints; policy sync (the default), so it does
	// delete records it owns that are no longer wanted; managing TXT
	// records too, which the hub publishes for a host without addresses
	// (docs/install.md).
	t.Setenv("ETCD_URLS", etcdURL)
	testenv.StartProcess(t, filepath.Join(bin, "external-dns"),
		"--kubeconfig="+env.KubeconfigFor(t, env.Config), "--source=crd", "--provider=coredns",
		"--registry=txt", "--txt-owner-id=flotilla-e2e", "--domain-filter=example.com",
		"--label-filter="+dnsendpoint.LabelManagedBy+"="+dnsendpoint.ManagedByHub,
		"--managed-record-types=A", "--managed-record-types=AAAA", "--managed-record-types=CNAME", "--managed-record-types=TXT",
		"--interval=1s", "--policy=sync")
	stopHub := startHub(t, env)

	for _, name := range []string{"member1", "member2"} {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setReady(t, fc, name, metav1.ConditionTrue)
	}
	createNamespace(t, env, tenant)
	placeWeb(t, fc, tenant, map[string]string{"member1": "10.0.1.1", "member2": "10.0.2.1"}, nil)
	createIngress(t, fc, tenant, "web", host)
	waitAnswer(t, dnsAddr, host, []string{"10.0.1.1", "10.0.2.1"})
	logEndpoint(t, dyn, tenant, "web")
	logDig(t, dnsAddr, host, "published")

	tenantsStayApart(t, env, fc, dyn, dnsAddr)
	subtreesStayWithTheirOwner(t, env, fc, dnsAddr)
	failoverFollowsBackendHealth(t, env, fc, dyn, dnsAddr)
	blockedHostExistsWithoutAddresses(t, env, fc, dnsAddr)

	// Failover: member1 leaves traffic; the published record follows.
	failover := time.Now()
	setReady(t, fc, "member1", metav1.ConditionFalse)
	waitAnswer(t, dnsAddr, host, []string{"10.0.2.1"})
	t.Logf("failover: member1 NotReady to CoreDNS answering without it in %s", time.Since(failover).Round(100*time.Millisecond))
	logDig(t, dnsAddr, host, "after the failover")

	// No cluster Ready: the decision fails open (both addresses, which the
	// status shows), but the hub cannot see the fleet: the record stays.
	setReady(t, fc, "member2", metav1.ConditionFalse)
	waitStatusAddresses(t, fc, tenant, "web", []string{"10.0.1.1", "10.0.2.1"})
	holdAnswer(t, dnsAddr, host, []string{"10.0.2.1"}, 4*time.Second)
	setReady(t, fc, "member2", metav1.ConditionTrue)
	waitStatusAddresses(t, fc, tenant, "web", []string{"10.0.2.1"})

	// The hub stops; the fleet changes under it (a change it would
	// publish); the DNSEndpoint and the answer stay through several
	// ExternalDNS runs.
	stopHub()
	setReady(t, fc, "member1", metav1.ConditionTrue)
	setReady(t, fc, "member2", metav1.ConditionFalse)
	holdAnswer(t, dnsAddr, host, []string{"10.0.2.1"}, 4*time.Second)
	logDig(t, dnsAddr, host, "hub stopped, member1 Ready again, member2 not")
	if _, err := dyn.Resource(dnsendpoint.GVR).Namespace(tenant).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("the DNSEndpoint is gone with the hub stopped: %v", err)
	}
	// The shipped roles were enough: the hub was refused nothing.
	if refused := env.RefusedRequests(t, testenv.ServiceAccountUser(hubNamespace, hubAccount)); len(refused) > 0 {
		t.Fatalf("the hub was refused, under manifests/hub and manifests/hub/dns-endpoint's roles:\n%s", strings.Join(refused, "\n"))
	}
	t.Logf("whole test: %s", time.Since(start).Round(100*time.Millisecond))
}

// failoverFollowsBackendHealth: an ingress with a failover strategy
// (member1 first) and its own TTL is answered with member1's address only;
// its backends there go unready (the agent reports 0 ready endpoints, the
// cluster stays Ready) and the answer becomes member2's hostname load
// balancer, a CNAME; ready again, member1 is back. The records are those
// the embedded DNS would answer (dnstraffic.HostAnswers).
func failoverFollowsBackendHealth(t *testing.T, env *testenv.Env, fc flotillaclient.Interface, dyn dynamic.Interface, dnsAddr string) {
	t.Helper()
	const ns, name = "team-c", "failover.example.com"
	one, zero := ptr.To[int32](1), ptr.To[int32](0)
	createNamespace(t, env, ns)
	placeWeb(t, fc, ns, map[string]string{"member1": "10.0.1.3", "member2": "lb-2.elb.example.net"}, one)
	createIngressWithStrategy(t, fc, ns, "web", &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, DNSTtlSeconds: 30,
		FailoverOrder: []networkingv1alpha1.FailoverGroup{{AffinityName: "primary", ClusterNames: []string{"member1"}}}}, name)
	waitRecords(t, dnsAddr, name, []string{"A 10.0.1.3 ttl=30"})
	logDig(t, dnsAddr, name, "failover strategy, member1 primary")

	unready := time.Now()
	reportWeb(t, fc, ns, "member1", "10.0.1.3", zero)
	waitRecords(t, dnsAddr, name, []string{"CNAME lb-2.elb.example.net. ttl=30"})
	t.Logf("member1's backends unready (readyEndpoints 0) to CoreDNS answering member2's CNAME in %s", time.Since(unready).Round(100*time.Millisecond))
	logEndpoint(t, dyn, ns, "web")
	logDig(t, dnsAddr, name, "member1's backends unready")

	reportWeb(t, fc, ns, "member1", "10.0.1.3", one)
	waitRecords(t, dnsAddr, name, []string{"A 10.0.1.3 ttl=30"})
}

// tenantsStayApart: a tenant allowed to write DNSEndpoints in its own
// namespace cannot forge the hub's label, an unlabelled DNSEndpoint of its
// own is not published, and its MultiClusterIngress claiming another
// tenant's (older) host, spelled with two trailing dots (stored while the
// admission policy that refuses that spelling was not bound), gets no
// record for it, only for its own host: the hub decides ownership on the
// canonical name and publishes exactly it.
func tenantsStayApart(t *testing.T, env *testenv.Env, fc flotillaclient.Interface, dyn dynamic.Interface, dnsAddr string) {
	t.Helper()
	ctx := context.Background()
	const other = "team-b"
	createNamespace(t, env, other)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: other},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"externaldns.k8s.io"}, Resources: []string{"dnsendpoints"}, Verbs: []string{"*"}}}}
	if _, err := env.Kube.RbacV1().Roles(other).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: other},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dns"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}
	if _, err := env.Kube.RbacV1().RoleBindings(other).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mallory := dynamic.NewForConfigOrDie(env.UserConfig(t, "mallory")).Resource(dnsendpoint.GVR).Namespace(other)
	forged := func(name string, labelled bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"endpoints": []any{
			map[string]any{"dnsName": host, "recordType": "A", "targets": []any{"192.0.2.66"}}}}}}
		u.SetGroupVersionKind(dnsendpoint.GVK)
		u.SetName(name)
		if labelled {
			u.SetLabels(map[string]string{dnsendpoint.LabelManagedBy: dnsendpoint.ManagedByHub})
		}
		return u
	}
	// The policy takes effect asynchronously: probe with dry runs.
	var refusal error
	poll(t, "the admission policy refusing a forged label", func() (bool, error) {
		_, refusal = mallory.Create(ctx, forged("web", true), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusal != nil && (apierrors.IsForbidden(refusal) || apierrors.IsInvalid(refusal)), nil
	})
	if !strings.Contains(refusal.Error(), "metadata.labels") {
		t.Fatalf("the refusal does not name the field: %v", refusal)
	}
	t.Logf("forged label refused: %v", refusal)
	if _, err := mallory.Create(ctx, forged("hijack", false), metav1.CreateOptions{}); err != nil {
		t.Fatalf("an unlabelled DNSEndpoint of the tenant's own: %v", err)
	}
	// A newer ingress of team-b claims team-a's host and one of its own.
	placeWeb(t, fc, other, map[string]string{"member1": "10.0.1.9", "member2": "10.0.2.9"}, nil)
	unbindIngressHostsPolicy(t, env, fc)
	createIngress(t, fc, other, "web", host+"..", "b.example.com")
	// b.example.com answering means ExternalDNS has run since the hijack
	// DNSEndpoint and team-b's were written.
	waitAnswer(t, dnsAddr, "b.example.com", []string{"10.0.1.9", "10.0.2.9"})
	if got := resolve(dnsAddr, host); !slices.Equal(got, []string{"10.0.1.1", "10.0.2.1"}) {
		t.Fatalf("%s answers %v after team-b's claims, want team-a's addresses only", host, got)
	}
	u, err := dyn.Resource(dnsendpoint.GVR).Namespace(other).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
	for _, ep := range eps {
		if name, _, _ := unstructured.NestedString(ep.(map[string]any), "dnsName"); name != "b.example.com" {
			t.Fatalf("team-b's DNSEndpoint publishes %s", name)
		}
	}
}

// subtreesStayWithTheirOwner: CoreDNS's etcd plugin answers a name with
// the records of every name below it, so without the hub's
// --ingress-host-subtree-ownership (on here, startHub) a team-x ingress
// for x.web.example.com would add its address to team-a's web.example.com.
// With it the newer claim gets HostConflict naming team-a's ingress, no
// record is published for it, and web.example.com keeps team-a's
// addresses only.
func subtreesStayWithTheirOwner(t *testing.T, env *testenv.Env, fc flotillaclient.Interface, dnsAddr string) {
	t.Helper()
	ctx := context.Background()
	const ns, name = "team-x", "x." + host
	createNamespace(t, env, ns)
	placeWeb(t, fc, ns, map[string]string{"member1": "10.0.9.9"}, nil)
	createIngress(t, fc, ns, "x", name)
	poll(t, "team-x's ingress for "+name+" in HostConflict", func() (bool, error) {
		mci, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "x", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(mci.Status.Conditions, networkingv1alpha1.ConditionHostsAdmitted)
		return c != nil && c.Reason == networkingv1alpha1.ReasonHostConflict && strings.Contains(c.Message, tenant+"/web"), nil
	})
	// Several ExternalDNS runs (--interval=1s): nothing of team-x's reaches
	// team-a's answer, nor its own name's.
	holdAnswer(t, dnsAddr, host, []string{"10.0.1.1", "10.0.2.1"}, 4*time.Second)
	logDig(t, dnsAddr, host, "team-x claims "+name+" beneath it")
	if got := resolve(dnsAddr, name); slices.Contains(got, "10.0.9.9") {
		t.Fatalf("%s answers %v: team-x's claim beneath team-a's host was published", name, got)
	}
}

// blockedHostExistsWithoutAddresses: an exact host whose only cluster a
// Remedy's TrafficControl blocks is published as a name without addresses
// (one TXT record), so in the provider's zone it exists and answers NODATA:
// a provider that synthesizes wildcards (RFC 4592: Route53, Cloud DNS,
// BIND...) then never answers it with another owner's *.example.com, as it
// would a name without records. (CoreDNS's etcd plugin synthesizes no
// wildcard from stored records at all, so here the wildcard cannot answer
// either way; what this setup shows is the name existing: NOERROR and the
// TXT, where it was NXDOMAIN.) Unblocked, its address is back.
func blockedHostExistsWithoutAddresses(t *testing.T, env *testenv.Env, fc flotillaclient.Interface, dnsAddr string) {
	t.Helper()
	ctx := context.Background()
	const blockedNS, wildNS, name = "team-d", "team-e", "blocked.example.com"
	createNamespace(t, env, wildNS)
	placeWeb(t, fc, wildNS, map[string]string{"member2": "10.0.2.5"}, nil)
	createIngress(t, fc, wildNS, "wild", "*.example.com")
	createNamespace(t, env, blockedNS)
	placeWeb(t, fc, blockedNS, map[string]string{"member1": "10.0.1.4"}, nil)
	createIngress(t, fc, blockedNS, "web", name)
	waitAnswer(t, dnsAddr, name, []string{"10.0.1.4"})

	block := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "block-member1"}, Spec: remedyv1alpha1.RemedySpec{
		ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}},
		Actions:         []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
	if _, err := fc.RemedyV1alpha1().Remedies().Create(ctx, block, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	blocked := time.Now()
	waitAnswer(t, dnsAddr, name, nil) // NOERROR without records: NODATA, not NXDOMAIN
	waitTXT(t, dnsAddr, name, []string{dnsendpoint.NoAddressText})
	t.Logf("member1 blocked to CoreDNS answering %s NODATA, with its TXT, in %s", name, time.Since(blocked).Round(100*time.Millisecond))
	logDig(t, dnsAddr, name, "every cluster of the host blocked")
	if err := fc.RemedyV1alpha1().Remedies().Delete(ctx, block.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, dnsAddr, name, []string{"10.0.1.4"})
	waitAnswer(t, dnsAddr, host, []string{"10.0.1.1", "10.0.2.1"})
}

// installHub applies what kustomize/hub-dns-endpoint adds to the hub's
// ServiceAccount, roles and admission policy: the DNSEndpoint CRD, the
// hub's rights on DNSEndpoints and the policy on the hub's label.
func installHub(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(env.Root, "manifests", "hub", "dns-endpoint")
	if err := env.ApplyFile(ctx, filepath.Join(component, "externaldns.k8s.io_dnsendpoints.yaml")); err != nil {
		t.Fatal(err)
	}
	poll(t, "the DNSEndpoint API served", func() (bool, error) {
		_, err := env.Kube.Discovery().ServerResourcesForGroupVersion(dnsendpoint.GVR.GroupVersion().String())
		return err == nil, nil
	})
	for _, file := range []string{
		filepath.Join(env.Root, "manifests", "hub", "serviceaccount.yaml"),
		filepath.Join(env.Root, "manifests", "hub", "rbac.yaml"),
		filepath.Join(env.Root, "manifests", "hub", "admission-policy.yaml"),
		filepath.Join(component, "rbac.yaml"),
		filepath.Join(component, "admission-policy.yaml"),
	} {
		if err := env.ApplyFile(ctx, file); err != nil {
			t.Fatal(err)
		}
	}
}
