package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	agentapp "github.com/flotilla-io/flotilla/agent/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// crRunAgent runs an agent for cluster in-process with hubCfg (its hub
// identity) and an admin member credential, at test speed; stop waits.
func crRunAgent(t *testing.T, cluster string, hub, member *testenv.Env, hubCfg *rest.Config) (stop func()) {
	t.Helper()
	opts := agentapp.NewOptions()
	opts.ClusterName = cluster
	opts.Kubeconfig = member.KubeconfigFor(t, member.Config)
	opts.HubKubeconfig = hub.KubeconfigFor(t, hubCfg)
	opts.NodeName = "node-a"
	opts.DNSProbe = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.LeaderElection.LeaseDuration, opts.LeaderElection.RenewDeadline, opts.LeaderElection.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	opts.ClusterStatusUpdateFrequency, opts.ClusterLeaseDuration = 200*time.Millisecond, 2*time.Second
	opts.ClusterFailureThreshold, opts.ClusterSuccessThreshold = 4*time.Second, time.Second
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := agentapp.Run(ctx, opts); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// crRegister creates the Cluster and waits for the identity the hub makes.
func (h *rbacHub) crRegister(t *testing.T, cluster string) {
	t.Helper()
	ctx := context.Background()
	ns := clusterlifecycle.Namespace(cluster)
	if _, err := h.admin.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rbacPoll(30*time.Second, func() bool {
		_, saErr := h.env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
		_, rbErr := h.env.Kube.RbacV1().RoleBindings(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
		_, crbErr := h.env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, clusterlifecycle.AgentClusterRoleName(cluster), metav1.GetOptions{})
		return saErr == nil && rbErr == nil && crbErr == nil
	}); err != nil {
		t.Fatalf("the hub did not make the agent's identity in %s: %v", ns, err)
	}
}

func (h *rbacHub) crWaitReady(t *testing.T, cluster string) {
	t.Helper()
	if err := rbacPoll(45*time.Second, func() bool {
		c, err := h.admin.ClusterV1alpha1().Clusters().Get(context.Background(), cluster, metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	}); err != nil {
		t.Fatalf("the agent did not report %s Ready: %v", cluster, err)
	}
}

// Issue 30 item 3: deleting a Ready cluster whose agent runs. The hub (under
// the shipped RBAC) deletes the cluster's Works first and keeps the agent's
// identity until they are gone, so the agent deletes every object it made on
// the member and releases every Work; then the namespace goes (a real
// namespace controller, kube-controller-manager, empties it), then the rest
// of the identity, then the Cluster. A cluster registered again under the
// name gets a new identity and its workloads back.
//
// Before: the hub deleted the namespace at once, the namespace controller
// deleted the agent's ServiceAccount and RoleBinding in the same pass, the
// agent could release none of its Works, the namespace stayed Terminating
// and the re-registered cluster never got an identity.
func TestDeletingAReadyClusterLetsItsAgentReleaseEveryWork(t *testing.T) {
	t.Parallel()
	h := rbacStartHubOn(t, testenv.Start(t, testenv.WithAuditLog(), testenv.WithControllerManager()), nil, nil)
	t.Cleanup(func() {
		if refused := h.env.RefusedRequests(t, rbacHubUser); len(refused) > 0 {
			t.Errorf("the hub's apiserver refused %d requests of the hub:\n  %s", len(refused), strings.Join(rbacDistinct(refused), "\n  "))
		}
	})
	member := testenv.Start(t)
	ctx := context.Background()
	if _, err := member.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const cluster, count = "member1", 20
	ns := clusterlifecycle.Namespace(cluster)

	h.crRegister(t, cluster)
	stopAgent := crRunAgent(t, cluster, h.env, member, h.env.ServiceAccountConfig(t, ns, clusterlifecycle.AgentServiceAccount))
	h.crWaitReady(t, cluster)

	// count ConfigMap templates, one policy placing them all on the cluster.
	if _, err := h.admin.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range count {
		name := fmt.Sprintf("cm-%02d", i)
		raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": map[string]any{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.admin.WorkV1alpha1().ResourceTemplates("default").Create(ctx, &workv1alpha1.ResourceTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	onMember := func() int {
		n := 0
		for i := range count {
			if _, err := member.Kube.CoreV1().ConfigMaps("default").Get(ctx, fmt.Sprintf("cm-%02d", i), metav1.GetOptions{}); err == nil {
				n++
			}
		}
		return n
	}
	if err := rbacPoll(90*time.Second, func() bool { return onMember() == count }); err != nil {
		t.Fatalf("%d of %d ConfigMaps reached the member: %v", onMember(), count, err)
	}

	// Remove the cluster while its agent runs.
	if err := h.admin.ClusterV1alpha1().Clusters().Delete(ctx, cluster, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := rbacPoll(90*time.Second, func() bool {
		_, cErr := h.admin.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		n, nsErr := h.env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		_, crbErr := h.env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, clusterlifecycle.AgentClusterRoleName(cluster), metav1.GetOptions{})
		works, _ := h.admin.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
		state = fmt.Sprintf("Cluster gone: %v, ClusterRoleBinding gone: %v, namespace gone: %v", apierrors.IsNotFound(cErr), apierrors.IsNotFound(crbErr), apierrors.IsNotFound(nsErr))
		if nsErr == nil {
			state += fmt.Sprintf(" (phase %s, %d Works left)", n.Status.Phase, len(works.Items))
		}
		return apierrors.IsNotFound(cErr) && apierrors.IsNotFound(nsErr) && apierrors.IsNotFound(crbErr)
	}); err != nil {
		t.Fatalf("the Cluster's removal did not complete: %s; %d of %d ConfigMaps still on the member", state, onMember(), count)
	}
	// The agent deleted what it made: the hub abandoned nothing.
	if n := onMember(); n != 0 {
		t.Errorf("%d of %d ConfigMaps are still on the member: the agent did not release their Works", n, count)
	}

	// Registered again under the same name: a new identity, a new agent
	// with a token of it, and the workloads come back.
	stopAgent()
	h.crRegister(t, cluster)
	crRunAgent(t, cluster, h.env, member, h.env.ServiceAccountConfig(t, ns, clusterlifecycle.AgentServiceAccount))
	h.crWaitReady(t, cluster)
	if err := rbacPoll(90*time.Second, func() bool { return onMember() == count }); err != nil {
		t.Fatalf("%d of %d ConfigMaps came back to the re-registered cluster: %v", onMember(), count, err)
	}
}
