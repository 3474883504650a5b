package externaldns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/dnsendpoint"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const pollTimeout = 30 * time.Second

// poll waits up to pollTimeout for cond, failing the test with what.
func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// startHub runs the hub in process as its shipped ServiceAccount, with
// DNSEndpoint publishing on and no agents (the test writes cluster status
// and Work status itself). The returned func stops it and waits.
func startHub(t *testing.T, env *testenv.Env) (stop func()) {
	t.Helper()
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.ServiceAccountConfig(t, hubNamespace, hubAccount))
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.BindingStatusHold = time.Second
	// No agents: keep the hand-written Ready from turning Unknown.
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour
	opts.DNSEndpointPublishing = true
	// CoreDNS merges subtrees (subtreesStayWithTheirOwner).
	opts.IngressHostSubtreeOwnership = true
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("hub: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// startEtcd runs an etcd of the test's own for the DNS records (not the
// apiserver's) and returns its client URL.
func startEtcd(t *testing.T, bin string) string {
	t.Helper()
	client, peer := "http://"+testenv.FreeAddr(t), "http://"+testenv.FreeAddr(t)
	testenv.StartProcess(t, filepath.Join(bin, "etcd"), "--data-dir="+t.TempDir(),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer, "--log-level=warn")
	poll(t, "etcd healthy", func() (bool, error) {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return client
}

// startCoreDNS serves example.com from etcd's SkyDNS records (the path
// ExternalDNS's CoreDNS provider writes, /skydns) and returns its address.
func startCoreDNS(t *testing.T, bin, etcdURL string) string {
	t.Helper()
	addr := freeUDPAndTCPAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	corefile := filepath.Join(t.TempDir(), "Corefile")
	conf := fmt.Sprintf("example.com:%s {\n  bind %s\n  etcd example.com {\n    path /skydns\n    endpoint %s\n  }\n  errors\n}\n", port, host, etcdURL)
	if err := os.WriteFile(corefile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.StartProcess(t, filepath.Join(bin, "coredns"), "-conf", corefile)
	poll(t, "CoreDNS answering", func() (bool, error) {
		msg := new(dns.Msg)
		msg.SetQuestion("example.com.", dns.TypeSOA)
		reply, _, err := new(dns.Client).Exchange(msg, addr)
		return err == nil && reply != nil, nil
	})
	return addr
}

// freeUDPAndTCPAddr is a loopback address whose port is free for both.
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

// resolve asks CoreDNS for name's A records, sorted, or says what failed.
func resolve(addr, name string) []string {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	reply, _, err := new(dns.Client).Exchange(msg, addr)
	if err != nil {
		return []string{"error " + err.Error()}
	}
	if reply.Rcode != dns.RcodeSuccess {
		return []string{"rcode " + dns.RcodeToString[reply.Rcode]}
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

// txt asks CoreDNS for name's TXT records, sorted, or says what failed.
func txt(addr, name string) []string {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	reply, _, err := new(dns.Client).Exchange(msg, addr)
	if err != nil {
		return []string{"error " + err.Error()}
	}
	if reply.Rcode != dns.RcodeSuccess {
		return []string{"rcode " + dns.RcodeToString[reply.Rcode]}
	}
	var out []string
	for _, rr := range reply.Answer {
		if r, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(r.Txt, ""))
		}
	}
	slices.Sort(out)
	return out
}

func waitTXT(t *testing.T, addr, name string, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		got = txt(addr, name)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s TXT answers %q, want %q", name, got, want)
	}
}

// unbindIngressHostsPolicy deletes the binding of the admission policy
// flotilla-ingress-hosts and waits until a host spelling it refuses is
// accepted, as for objects stored before the policy existed.
func unbindIngressHostsPolicy(t *testing.T, env *testenv.Env, fc flotillaclient.Interface) {
	t.Helper()
	ctx := context.Background()
	if err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "flotilla-ingress-hosts", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"}}
	probe.Spec.Rules = []networkingv1.IngressRule{{Host: "WEB.example.com.."}}
	poll(t, "the ingress-hosts policy unbound", func() (bool, error) {
		_, err := fc.NetworkingV1alpha1().MultiClusterIngresses("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
}

func waitAnswer(t *testing.T, addr, name string, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		got = resolve(addr, name)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s answers %v, want %v", name, got, want)
	}
}

// records asks CoreDNS for name's A records and returns every answer
// record as "TYPE data ttl=N", sorted, or says what failed.
func records(addr, name string) []string {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	reply, _, err := new(dns.Client).Exchange(msg, addr)
	if err != nil {
		return []string{"error " + err.Error()}
	}
	if reply.Rcode != dns.RcodeSuccess {
		return []string{"rcode " + dns.RcodeToString[reply.Rcode]}
	}
	var out []string
	for _, rr := range reply.Answer {
		h := rr.Header()
		out = append(out, fmt.Sprintf("%s %s ttl=%d", dns.TypeToString[h.Rrtype], strings.TrimPrefix(rr.String(), h.String()), h.Ttl))
	}
	slices.Sort(out)
	return out
}

func waitRecords(t *testing.T, addr, name string, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		got = records(addr, name)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s answers %q, want %q", name, got, want)
	}
}

// holdAnswer checks name keeps answering want for d (ExternalDNS runs
// every second, so d spans several runs).
func holdAnswer(t *testing.T, addr, name string, want []string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got := resolve(addr, name); !slices.Equal(got, want) {
			t.Fatalf("%s answers %v, want it to stay %v", name, got, want)
		}
	}
}

func createNamespace(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	if _, err := env.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setReady writes a cluster's Ready condition as its agent would.
func setReady(t *testing.T, fc flotillaclient.Interface, cluster string, status metav1.ConditionStatus) {
	t.Helper()
	poll(t, "Ready="+string(status)+" on "+cluster, func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: status,
			Reason: "Test", Message: "set by the test"})
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// placeWeb propagates the LoadBalancer Service web of ns to the clusters of
// addrs and reports each cluster's load-balancer address (an IP, or a
// hostname) as its agent would, with ready endpoints (nil: not counted).
func placeWeb(t *testing.T, fc flotillaclient.Interface, ns string, addrs map[string]string, ready *int32) {
	t.Helper()
	ctx := context.Background()
	clusters := make([]string, 0, len(addrs))
	for c := range addrs {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(webService)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, cluster := range clusters {
		reportWeb(t, fc, ns, cluster, addrs[cluster], ready)
	}
}

// reportWeb writes the status of Service web of ns on cluster into its
// Work, as the cluster's agent would: applied, its load balancer's address
// (an IP, or a hostname) and its ready endpoints (nil: not counted).
func reportWeb(t *testing.T, fc flotillaclient.Interface, ns, cluster, addr string, ready *int32) {
	t.Helper()
	ctx := context.Background()
	name := workobjects.WorkName(ns, workobjects.BindingName("Service", "web"))
	lb := fmt.Sprintf(`{"ip":%q}`, addr)
	if _, err := netip.ParseAddr(addr); err != nil {
		lb = fmt.Sprintf(`{"hostname":%q}`, addr)
	}
	status := fmt.Sprintf(`{"loadBalancer":{"ingress":[%s]}}`, lb)
	poll(t, "the Work of "+ns+"/web on "+cluster+" and its status", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
		w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Version: "v1", Kind: "Service", Namespace: ns, Name: "web"},
			Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: workv1alpha1.ResourceHealthy, ReadyEndpoints: ready}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// createIngress creates a MultiClusterIngress routing hosts to Service web.
func createIngress(t *testing.T, fc flotillaclient.Interface, ns, name string, hosts ...string) {
	t.Helper()
	createIngressWithStrategy(t, fc, ns, name, nil, hosts...)
}

// createIngressWithStrategy is createIngress with spec.strategy.
func createIngressWithStrategy(t *testing.T, fc flotillaclient.Interface, ns, name string, strategy *networkingv1alpha1.TrafficStrategy, hosts ...string) {
	t.Helper()
	prefix := networkingv1.PathTypePrefix
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	mci.Spec.Strategy = strategy
	for _, h := range hosts {
		mci.Spec.Rules = append(mci.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}})
	}
	if _, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(context.Background(), mci, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitStatusAddresses waits for the ingress's recorded decision.
func waitStatusAddresses(t *testing.T, fc flotillaclient.Interface, ns, name string, want []string) {
	t.Helper()
	poll(t, fmt.Sprintf("%s/%s status addresses %v", ns, name, want), func() (bool, error) {
		mci, err := fc.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var got []string
		for _, lb := range mci.Status.LoadBalancer.Ingress {
			got = append(got, lb.IP)
		}
		slices.Sort(got)
		return slices.Equal(got, want), nil
	})
}

// logEndpoint logs the hub's DNSEndpoint as YAML (docs/dnstraffic.md shows it).
func logEndpoint(t *testing.T, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	u, err := dyn.Resource(dnsendpoint.GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetManagedFields(nil)
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the hub's DNSEndpoint:\n%s", out)
}

// checkShippedCRD compares manifests/hub/dns-endpoint's CRD with the one in
// the ExternalDNS module hack/tools/externaldns pins, when that module is
// in the module cache (hack/build-tools.sh external-dns put it there).
func checkShippedCRD(t *testing.T, root string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/external-dns")
	cmd.Dir = filepath.Join(root, "hack", "tools", "externaldns")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Logf("not comparing the shipped DNSEndpoint CRD: the ExternalDNS module is not in the module cache (%v)", err)
		return
	}
	upstream, err := testenv.DecodeFile(filepath.Join(dir, "config", "crd", "standard", "dnsendpoints.externaldns.k8s.io.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := testenv.DecodeFile(filepath.Join(root, "manifests", "hub", "dns-endpoint", "externaldns.k8s.io_dnsendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(upstream) != 1 || len(shipped) != 1 || !apiequality.Semantic.DeepEqual(upstream[0].Object, shipped[0].Object) {
		a, _ := yaml.Marshal(shipped)
		b, _ := yaml.Marshal(upstream)
		t.Fatalf("manifests/hub/dns-endpoint/externaldns.k8s.io_dnsendpoints.yaml differs from %s/config/crd/standard (copy it again):\n%s",
			dir, firstDiff(string(a), string(b)))
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: shipped %q, module %q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(la), len(lb))
}

// logDig logs `dig` against CoreDNS when dig is installed (the output
// docs/dnstraffic.md shows); the assertions use miekg/dns.
func logDig(t *testing.T, addr, name, when string) {
	t.Helper()
	dig, err := exec.LookPath("dig")
	if err != nil {
		return
	}
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(dig, "@"+host, "-p", port, name, "A", "+noall", "+answer").CombinedOutput()
	t.Logf("%s: dig @%s -p %s %s A +noall +answer (err %v)\n%s", when, host, port, name, err, out)
}
