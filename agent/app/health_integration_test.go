package app_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/agent/app"
	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// fleet is a hub and one member, each a real kube-apiserver, with a DNS
// server answering for the member's kubernetes Service.
type fleet struct {
	hub, member      *testenv.Env
	hubFlotilla      flotillaclient.Interface
	hubKubeconfig    string
	memberKubeconfig string
	dnsServer        string
	metrics, health  string
	clusterName      string
	clusterNamespace string
	memberKubeSystem string
	agentNamespace   string
	agentLeaderLease string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{hub: testenv.Start(t), member: testenv.Start(t), clusterName: "member1",
		clusterNamespace: "flotilla-es-member1", agentNamespace: "flotilla-system", agentLeaderLease: "flotilla-agent"}
	var err error
	f.hubFlotilla, err = flotillaclient.NewForConfig(f.hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	f.hubKubeconfig = f.hub.KubeconfigFor(t, f.hub.Config)
	f.memberKubeconfig = f.member.KubeconfigFor(t, f.member.Config)
	f.dnsServer = startDNSServer(t, "10.0.0.1")
	f.metrics, f.health = testenv.FreeAddr(t), testenv.FreeAddr(t)
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.agentNamespace}}, metav1.CreateOptions{})
		return err
	})
	ks, err := f.member.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.memberKubeSystem = string(ks.UID)
	return f
}

// register creates the Cluster (with spec.id) and the namespace and Lease
// the hub's cluster controller will own.
func (f *fleet) register(t *testing.T, id string, withLease bool) {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := f.hubFlotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: f.clusterName},
			Spec:       clusterv1alpha1.ClusterSpec{ID: id, SyncMode: clusterv1alpha1.Pull},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := f.hub.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.clusterNamespace}}, metav1.CreateOptions{})
		return err
	})
	if withLease {
		f.createLease(t)
	}
}

func (f *fleet) createLease(t *testing.T) {
	t.Helper()
	mustCreate(t, func() error {
		_, err := f.hub.Kube.CoordinationV1().Leases(f.clusterNamespace).Create(context.Background(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: f.clusterName},
			Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](40)},
		}, metav1.CreateOptions{})
		return err
	})
}

// fastOptions are agent options with every period shrunk for tests.
func (f *fleet) fastOptions(node string) *app.Options {
	o := app.NewOptions()
	o.ClusterName = f.clusterName
	o.Kubeconfig = f.memberKubeconfig
	o.HubKubeconfig = f.hubKubeconfig
	o.NodeName = node
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.LeaderElection.LeaseDuration, o.LeaderElection.RenewDeadline, o.LeaderElection.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	o.ClusterStatusUpdateFrequency = 200 * time.Millisecond
	o.ClusterLeaseDuration = 2 * time.Second
	// The failure threshold outlasts the election lease (Validate insists):
	// a leader cut off from the member steps down before it could report.
	o.ClusterFailureThreshold, o.ClusterSuccessThreshold = 4*time.Second, time.Second
	o.DNSDetectPeriod, o.DNSStaleThreshold = 100*time.Millisecond, 2*time.Second
	o.DNSFailureThreshold, o.DNSSuccessThreshold = time.Second, time.Second
	o.DNSServer = f.dnsServer
	return o
}

// runAgent runs the agent in-process until the test ends.
func runAgent(t *testing.T, opts *app.Options) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := app.Run(ctx, opts); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func (f *fleet) cluster(t *testing.T) *clusterv1alpha1.Cluster {
	t.Helper()
	c, err := f.hubFlotilla.ClusterV1alpha1().Clusters().Get(context.Background(), f.clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fleet) renewTime(t *testing.T) time.Time {
	t.Helper()
	l, err := f.hub.Kube.CoordinationV1().Leases(f.clusterNamespace).Get(context.Background(), f.clusterName, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// TestAgentReportsStatusFromInformersAndWritesOnlyOnChange: the agent sets
// spec.id, reports Ready and DNS with reasons, the inventory (version, APIs,
// nodes, resources from the member's nodes and pods), renews the hub Lease,
// and writes the status again only when the member changes.
func TestAgentReportsStatusFromInformersAndWritesOnlyOnChange(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	ctx := context.Background()
	for _, name := range []string{"node-a", "node-b"} {
		createReadyNode(t, f.member.Kube, name, "4", "8Gi")
	}
	runAgent(t, f.fastOptions("node-a"))

	poll(t, 30*time.Second, "Ready, DNS and inventory on the Cluster", func() bool {
		c := f.cluster(t)
		ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		dnsCond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady)
		return c.Spec.ID == f.memberKubeSystem && ready != nil && ready.Status == metav1.ConditionTrue &&
			ready.Reason == clusterv1alpha1.ClusterReasonReady && dnsCond != nil && dnsCond.Status == metav1.ConditionTrue &&
			c.Status.NodeSummary != nil && c.Status.NodeSummary.TotalNum == 2 && c.Status.NodeSummary.ReadyNum == 2 &&
			c.Status.ResourceSummary != nil && c.Status.ResourceSummary.Allocatable.Cpu().Cmp(resource.MustParse("8")) == 0
	})
	c := f.cluster(t)
	if !strings.HasPrefix(c.Status.KubernetesVersion, "v1.") {
		t.Errorf("kubernetesVersion = %q", c.Status.KubernetesVersion)
	}
	if !hasAPI(c, "apps/v1", "deployments") {
		t.Errorf("apiEnablements lack apps/v1 deployments: %v", c.Status.APIEnablements)
	}
	first := f.renewTime(t)
	poll(t, 10*time.Second, "the hub Lease to be renewed again", func() bool { return f.renewTime(t).After(first) })

	// Idle: 10 status periods pass without a status write.
	rv := f.cluster(t).ResourceVersion
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if got := f.cluster(t).ResourceVersion; got != rv {
			t.Fatalf("Cluster written while the member was idle (resourceVersion %s → %s)", rv, got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A pod bound to a node changes the allocated resources: one write.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}},
	}
	if _, err := f.member.Kube.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "allocated cpu 1500m from the pod", func() bool {
		rs := f.cluster(t).Status.ResourceSummary
		return rs != nil && rs.Allocated.Cpu().Cmp(resource.MustParse("1500m")) == 0 && rs.Allocated.Pods().Value() == 1
	})
}

// TestAgentRefusesAClusterOfAnotherMember: a Cluster whose spec.id is not
// this member's kube-system UID gets a warning event, no status and no Lease
// renewal.
func TestAgentRefusesAClusterOfAnotherMember(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "some-other-member-uid", true)
	runAgent(t, f.fastOptions("node-a"))

	poll(t, 30*time.Second, "a ClusterIDMismatch event", func() bool {
		events, err := f.hub.Kube.CoreV1().Events(f.clusterNamespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "ClusterIDMismatch").String()})
		return err == nil && len(events.Items) > 0 && strings.Contains(events.Items[0].Message, f.memberKubeSystem)
	})
	// Many status periods and Lease intervals later: nothing written.
	for range 20 {
		c := f.cluster(t)
		if len(c.Status.Conditions) > 0 || c.Spec.ID != "some-other-member-uid" {
			t.Fatalf("agent acted for a Cluster of another member: %+v", c.Status)
		}
		if !f.renewTime(t).IsZero() {
			t.Fatal("agent renewed the Lease of a Cluster of another member")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAgentWaitsForClusterAndLease: a missing Cluster or Lease is a retried
// error; once they exist the agent reports and renews.
func TestAgentWaitsForClusterAndLease(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	opts := f.fastOptions("node-a")
	opts.MetricsBindAddress = f.metrics
	runAgent(t, opts)
	poll(t, 30*time.Second, "the missing Cluster to be retried", func() bool {
		_, body, err := testenv.HTTPGet(context.Background(), f.metrics, "/metrics")
		return err == nil && metricAtLeast(body, `flotilla_agent_hub_request_errors_total{operation="get-cluster",reason="NotFound"}`, 3)
	})
	f.register(t, "", false)
	poll(t, 30*time.Second, "Ready on the late Cluster", func() bool {
		return meta.IsStatusConditionTrue(f.cluster(t).Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	})
	f.createLease(t)
	poll(t, 30*time.Second, "the late Lease to be renewed", func() bool { return !f.renewTime(t).IsZero() })
}

// TestAgentFailsOverToTheOtherAgent: two agents, one leads; when the leader
// stops, the other takes over the election Lease and the hub Lease.
func TestAgentFailsOverToTheOtherAgent(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	ctx := context.Background()
	first := f.fastOptions("node-a")
	ctxA, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { defer close(doneA); _ = app.Run(ctxA, first) }()
	t.Cleanup(func() { stopA(); <-doneA })
	poll(t, 30*time.Second, "node-a to lead", func() bool { return strings.HasPrefix(f.holder(t), "node-a_") })
	runAgent(t, f.fastOptions("node-b"))

	// Both pods publish DNS verdicts; only the leader renews the hub Lease.
	poll(t, 10*time.Second, "two DNS verdicts", func() bool {
		l, err := f.member.Kube.CoordinationV1().Leases(f.agentNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsprobe.LabelVerdict})
		return err == nil && len(l.Items) == 2
	})
	poll(t, 10*time.Second, "node-a to renew the hub Lease", func() bool { return strings.HasPrefix(f.hubHolder(t), "node-a_") })

	stopA() // released on cancel: node-b need not wait out the lease
	<-doneA
	poll(t, 10*time.Second, "node-b to lead", func() bool { return strings.HasPrefix(f.holder(t), "node-b_") })
	poll(t, 10*time.Second, "node-b to renew the hub Lease", func() bool { return strings.HasPrefix(f.hubHolder(t), "node-b_") })
}

func (f *fleet) holder(t *testing.T) string {
	l, err := f.member.Kube.CoordinationV1().Leases(f.agentNamespace).Get(context.Background(), f.agentLeaderLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (f *fleet) hubHolder(t *testing.T) string {
	l, err := f.hub.Kube.CoordinationV1().Leases(f.clusterNamespace).Get(context.Background(), f.clusterName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestAgentBinarySurvivesAHubThatRefusesIt: with credentials the hub refuses
// (403) and with a hub that is down, the agent keeps running, counts the
// failures in a metric and logs each state once, not once per retry.
func TestAgentBinarySurvivesAHubThatRefusesIt(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	bin := testenv.BuildBinary(t, "./agent")
	nobody := f.hub.KubeconfigFor(t, f.hub.UserConfig(t, "nobody"))
	proc := testenv.StartProcess(t, bin, "--cluster-name", f.clusterName, "--node-name", "node-a",
		"--kubeconfig", f.memberKubeconfig, "--hub-kubeconfig", nobody, "--dns-server", f.dnsServer,
		"--cluster-status-update-frequency", "100ms",
		"--health-probe-bind-address", f.health, "--metrics-bind-address", f.metrics)
	ctx := context.Background()
	poll(t, 30*time.Second, "Forbidden counted 10 times", func() bool {
		_, body, err := testenv.HTTPGet(ctx, f.metrics, "/metrics")
		return err == nil && metricAtLeast(body, `flotilla_agent_hub_request_errors_total{operation="get-cluster",reason="Forbidden"}`, 10)
	})
	// Once per operation: the status controller's get-cluster here (every
	// pod's hub Lease observer logs its own get-lease once too).
	for _, op := range []string{"get-cluster", "get-lease"} {
		n := 0
		for _, line := range strings.Split(proc.Output(), "\n") {
			if strings.Contains(line, "Hub operation failing") && strings.Contains(line, `operation="`+op+`"`) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("want the Forbidden state of %s logged once, got %d lines", op, n)
		}
	}
	if code, _, err := testenv.HTTPGet(ctx, f.health, "/healthz"); err != nil || code != 200 {
		t.Errorf("/healthz = %d, %v: a refusing hub is not the agent's own ill health", code, err)
	}
	if err := proc.Terminate(20 * time.Second); err != nil {
		t.Fatalf("agent did not exit cleanly: %v", err)
	}
	if c := f.cluster(t); len(c.Status.Conditions) != 0 || c.Spec.ID != "" {
		t.Errorf("a refused agent wrote the Cluster: %+v", c)
	}
}

func metricAtLeast(body, series string, min float64) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			_, err := fmt.Sscan(strings.TrimPrefix(line, series+" "), &v)
			return err == nil && v >= min
		}
	}
	return false
}

func hasAPI(c *clusterv1alpha1.Cluster, gv, resource string) bool {
	for _, e := range c.Status.APIEnablements {
		if e.GroupVersion != gv {
			continue
		}
		for _, r := range e.Resources {
			if r.Name == resource {
				return true
			}
		}
	}
	return false
}

func createReadyNode(t *testing.T, kube kubernetes.Interface, name, cpu, memory string) {
	t.Helper()
	ctx := context.Background()
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: list, Allocatable: list,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// startDNSServer answers A queries for kubernetes.default.svc.cluster.local.
func startDNSServer(t *testing.T, ip string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Name == dnsprobe.ProbeName("cluster.local") && r.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = server.ActivateAndServe() }()
	t.Cleanup(func() { _ = server.Shutdown() })
	return pc.LocalAddr().String()
}
