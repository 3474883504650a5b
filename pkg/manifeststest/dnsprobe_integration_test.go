package manifeststest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The DNS probe's identity, as the agent overlay installs it (RBAC and the
// ValidatingAdmissionPolicy flotilla-dns-probe-own-node), against a real
// kube-apiserver, authenticated the way a DaemonSet pod is: with a token
// bound to a Pod on a Node, which carries the node claim the policy reads.
func TestDNSProbeIdentityAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	objs := render(t, filepath.Join("kustomize/agent/overlays", agentOverlayForClusters))
	var manifest []byte
	for _, o := range objs {
		doc, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		manifest = append(append(manifest, "---\n"...), doc...)
	}
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := env.ApplyFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	get(t, objs, "DaemonSet", dnsProbeDaemonSetName, ds)
	ns, sa := ds.Namespace, ds.Spec.Template.Spec.ServiceAccountName
	var hubSecret string
	for _, o := range objs {
		if o.GetKind() == "Secret" && strings.HasPrefix(o.GetName(), "flotilla-agent-hub-kubeconfig") {
			hubSecret = o.GetName()
		}
	}
	if hubSecret == "" {
		t.Fatal("the overlay renders no hub kubeconfig Secret")
	}

	nodeA, nodeB := createNode(ctx, t, env.Kube, "node-a"), createNode(ctx, t, env.Kube, "node-b")
	probeA := probeClient(t, env, tokenForPod(ctx, t, env.Kube, ns, sa, createPod(ctx, t, env.Kube, ns, sa, nodeA.Name)))
	leases := probeA.CoordinationV1().Leases(ns)

	// The token the kubelet would mount names the pod's node.
	review, err := probeA.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != nodeA.Name {
		t.Fatalf("a token bound to a pod on %s carries node claim %v (user %+v)", nodeA.Name, got, review.Status.UserInfo)
	}

	// Admission policies take effect asynchronously: wait until a write that
	// only the policy forbids (RBAC allows creating any Lease) is refused.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := leases.Create(ctx, verdictLease("flotilla-agent", nodeA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "flotilla-dns-probe-own-node"), nil
	})
	if err != nil {
		t.Fatalf("the policy flotilla-dns-probe-own-node never took effect: %v", err)
	}

	// Its own verdict: create and update.
	own, err := leases.Create(ctx, verdictLease(dnsprobe.VerdictLeaseName(nodeA.Name), nodeA), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the probe on %s cannot create its own verdict: %v", nodeA.Name, err)
	}
	own.Labels[dnsprobe.LabelStatus] = "False"
	if _, err := leases.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the probe on %s cannot update its own verdict: %v", nodeA.Name, err)
	}
	// Without an owner (the probe could not read its Node) is fine too:
	// admission passes, then the name is taken.
	unowned := verdictLease(dnsprobe.VerdictLeaseName(nodeA.Name), nodeA)
	unowned.OwnerReferences = nil
	if _, err := leases.Create(ctx, unowned, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("a verdict without an owner should pass the policy (and then exist already): %v", err)
	}

	// What the policy refuses, although RBAC allows it.
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-x_1")}}
	if _, err := env.Kube.CoordinationV1().Leases(ns).Create(ctx, leader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	otherVerdict, err := env.Kube.CoordinationV1().Leases(ns).Create(ctx, verdictLease(dnsprobe.VerdictLeaseName(nodeB.Name), nodeB), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(l *coordinationv1.Lease, f func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l = l.DeepCopy()
		f(l)
		return l
	}
	mine := verdictLease(dnsprobe.VerdictLeaseName(nodeA.Name), nodeA)
	mine.Name = "flotilla-dns-node-a-2" // a fresh name, so a create is refused by the policy and not as AlreadyExists
	for name, write := range map[string]func() error{
		// Admission runs before the store's AlreadyExists.
		"create another node's verdict": func() error {
			_, err := leases.Create(ctx, verdictLease(dnsprobe.VerdictLeaseName(nodeB.Name), nodeB), metav1.CreateOptions{})
			return err
		},
		"create a verdict for a node that does not exist yet": func() error {
			_, err := leases.Create(ctx, verdictLease("flotilla-dns-node-z", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-z", UID: "6d0f6c2e-0000-4000-8000-000000000000"}}), metav1.CreateOptions{})
			return err
		},
		"create a verdict for itself under another name": func() error {
			_, err := leases.Create(ctx, mine, metav1.CreateOptions{})
			return err
		},
		"update another node's verdict": func() error {
			_, err := leases.Update(ctx, mutate(otherVerdict, func(l *coordinationv1.Lease) { l.Labels[dnsprobe.LabelStatus] = "False" }), metav1.UpdateOptions{})
			return err
		},
		"update another node's verdict claiming to be that node": func() error {
			_, err := leases.Update(ctx, mutate(otherVerdict, func(l *coordinationv1.Lease) { l.Annotations[dnsprobe.AnnotationNode] = nodeA.Name }), metav1.UpdateOptions{})
			return err
		},
		"take the leader-election Lease": func() error {
			got, err := leases.Get(ctx, "flotilla-agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Spec.HolderIdentity = ptr.To(nodeA.Name + "_evil")
			_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			return err
		},
		"create a Lease that is no verdict": func() error {
			_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent-2", Namespace: ns}}, metav1.CreateOptions{})
			return err
		},
		"drop the verdict label from its own verdict": func() error {
			got, err := leases.Get(ctx, own.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(got.Labels, dnsprobe.LabelVerdict)
			_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			return err
		},
		"speak for another node in its own verdict": func() error {
			got, err := leases.Get(ctx, own.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Annotations[dnsprobe.AnnotationNode] = nodeB.Name
			_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			return err
		},
		"make its verdict owned by another node": func() error {
			got, err := leases.Get(ctx, own.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeB.Name, UID: nodeB.UID}}
			_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			return err
		},
		"make its verdict owned by a Node of its name but another UID": func() error {
			got, err := leases.Get(ctx, own.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeA.Name, UID: nodeB.UID}}
			_, err = leases.Update(ctx, got, metav1.UpdateOptions{})
			return err
		},
	} {
		if err := write(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "flotilla-dns-probe-own-node") {
			t.Errorf("%s: want the policy to refuse it, got %v", name, err)
		}
	}
	if l, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, "flotilla-agent", metav1.GetOptions{}); err != nil || *l.Spec.HolderIdentity != "node-x_1" {
		t.Errorf("the leader-election Lease changed: %v %v", l, err)
	}

	// What RBAC refuses: the hub token, every Secret, workloads, the agent's
	// own reads, deleting anything.
	for name, call := range map[string]func() error{
		"get the hub kubeconfig Secret": func() error {
			_, err := probeA.CoreV1().Secrets(ns).Get(ctx, hubSecret, metav1.GetOptions{})
			return err
		},
		"list Secrets in its namespace": func() error {
			_, err := probeA.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"list Secrets cluster-wide": func() error {
			_, err := probeA.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		},
		"create a Deployment": func() error {
			_, err := probeA.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}}}, metav1.CreateOptions{})
			return err
		},
		"create a Deployment in its namespace": func() error {
			_, err := probeA.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"create a Pod in its namespace": func() error {
			_, err := probeA.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"patch the agent Deployment": func() error {
			_, err := probeA.AppsV1().Deployments(ns).Patch(ctx, agentDeploymentName, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		"request a token for the agent's ServiceAccount": func() error {
			_, err := probeA.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "flotilla-agent", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		},
		"list Leases (other nodes' verdicts)": func() error {
			_, err := probeA.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"delete its own verdict": func() error {
			return probeA.CoordinationV1().Leases(ns).Delete(ctx, own.Name, metav1.DeleteOptions{})
		},
		"list Nodes": func() error {
			_, err := probeA.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		},
		"update its Node": func() error {
			n, err := probeA.CoreV1().Nodes().Get(ctx, nodeA.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Labels = map[string]string{"x": "y"}
			_, err = probeA.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the DNS probe identity can %s (err %v)", name, err)
		}
	}

	// A token that names no node (a legacy or hand-made one) writes nothing,
	// not even a well-formed verdict.
	unbound, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = probeClient(t, env, unbound.Status.Token).CoordinationV1().Leases(ns).Create(ctx,
		verdictLease(dnsprobe.VerdictLeaseName(nodeB.Name)+"-y", nodeB), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "pod-bound token") {
		t.Errorf("a token without a node claim: want the policy to refuse the write, got %v", err)
	}

	// A node name too long for flotilla-dns-<node>: the hashed name, and
	// nothing but that prefix.
	long := strings.Repeat("a", 62) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + "." + strings.Repeat("d", 62)
	nodeL := createNode(ctx, t, env.Kube, long)
	probeL := probeClient(t, env, tokenForPod(ctx, t, env.Kube, ns, sa, createPod(ctx, t, env.Kube, ns, sa, nodeL.Name)))
	longName := dnsprobe.VerdictLeaseName(nodeL.Name)
	if len("flotilla-dns-"+long) <= 253 || longName == "flotilla-dns-"+long {
		t.Fatalf("node name %d characters long does not exercise the hashed Lease name", len(long))
	}
	if _, err := probeL.CoordinationV1().Leases(ns).Create(ctx, verdictLease(longName, nodeL), metav1.CreateOptions{}); err != nil {
		t.Errorf("the probe on a node with a long name cannot create its verdict %s: %v", longName, err)
	}
	for _, name := range []string{
		longName[:len(longName)-16] + "0123456789abcdeg",                    // not hex
		longName[:len(longName)-18] + "-0123456789abcdef",                   // another cut of the node name
		"flotilla-dns-" + strings.Repeat("a", 62) + "-0123456789abcdef0123", // another prefix
	} {
		if _, err := probeL.CoordinationV1().Leases(ns).Create(ctx, verdictLease(name, nodeL), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the probe on a node with a long name may create %s: %v", name, err)
		}
	}

	// The real `agent dns-probe`, with that identity and no hub kubeconfig,
	// publishes its node's verdict owned by its Node.
	nodeC := createNode(ctx, t, env.Kube, "node-c")
	tokenC := tokenForPod(ctx, t, env.Kube, ns, sa, createPod(ctx, t, env.Kube, ns, sa, nodeC.Name))
	kubeconfig := env.KubeconfigFor(t, &rest.Config{Host: env.Config.Host, BearerToken: tokenC,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	bin := testenv.BuildBinary(t, "./agent")
	health := testenv.FreeAddr(t)
	proc := testenv.StartProcess(t, bin, "dns-probe", "--kubeconfig", kubeconfig, "--namespace", ns, "--node-name", nodeC.Name,
		"--dns-server", startDNSServer(t), "--dns-detect-period", "200ms", "--dns-success-threshold", "0", "--dns-stale-threshold", "2s",
		"--health-probe-bind-address", health, "--metrics-bind-address", "0")
	var verdict *coordinationv1.Lease
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		verdict, err = env.Kube.CoordinationV1().Leases(ns).Get(ctx, dnsprobe.VerdictLeaseName(nodeC.Name), metav1.GetOptions{})
		return err == nil && verdict.Labels[dnsprobe.LabelStatus] == "True", nil
	})
	if err != nil {
		t.Fatalf("agent dns-probe published no True verdict for %s: %v (last %v)\n%s", nodeC.Name, err, verdict, proc.Output())
	}
	if refs := verdict.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != nodeC.UID {
		t.Errorf("verdict owners %v, want Node %s (%s)", refs, nodeC.Name, nodeC.UID)
	}
	if h := ptr.Deref(verdict.Spec.HolderIdentity, ""); !strings.HasPrefix(h, nodeC.Name+"_") {
		t.Errorf("verdict holder %q, want the probe's identity on %s", h, nodeC.Name)
	}
	renewed := verdict.Spec.RenewTime.Time
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, verdict.Name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(renewed), nil
	})
	if err != nil {
		t.Errorf("agent dns-probe does not renew its verdict: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		code, _, err := testenv.HTTPGet(ctx, health, "/readyz")
		return err == nil && code == 200, nil
	})
	if err != nil {
		t.Errorf("agent dns-probe never ready: %v", err)
	}
	if err := proc.Terminate(20 * time.Second); err != nil {
		t.Errorf("agent dns-probe did not exit cleanly on SIGTERM: %v\n%s", err, proc.Output())
	}
	if strings.Contains(proc.Output(), "Cannot publish") {
		t.Errorf("agent dns-probe failed a publish with the manifests' rights:\n%s", proc.Output())
	}
}

func createNode(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// createPod makes a Pod as the DaemonSet would, already bound to node (no
// scheduler runs here).
func createPod(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, sa, node string) *corev1.Pod {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "flotilla-dns-probe-", Namespace: ns},
		Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node,
			Containers: []corev1.Container{{Name: "dns-probe", Image: "flotilla:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenForPod is the token the kubelet projects into pod: bound to it, and
// through it to its node.
func tokenForPod(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, sa string, pod *corev1.Pod) string {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func probeClient(t *testing.T, env *testenv.Env, token string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verdictLease is node's well-formed verdict Lease named name, owned by node.
func verdictLease(name string, node *corev1.Node) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:          map[string]string{dnsprobe.LabelVerdict: "true", dnsprobe.LabelStatus: "True", dnsprobe.LabelReason: "ServiceDomainNameResolved"},
			Annotations:     map[string]string{dnsprobe.AnnotationNode: node.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name + "_test"), LeaseDurationSeconds: ptr.To[int32](60),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}

// startDNSServer answers A queries for kubernetes.default.svc.cluster.local.
func startDNSServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Name == dnsprobe.ProbeName("cluster.local") && r.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP("10.0.0.1")})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = server.ActivateAndServe() }()
	t.Cleanup(func() { _ = server.Shutdown() })
	return pc.LocalAddr().String()
}
