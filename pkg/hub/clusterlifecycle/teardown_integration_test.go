package clusterlifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// These tests run a real kube-controller-manager (namespace controller and
// garbage collector) beside the apiserver: a deleted namespace is really
// emptied and removed, with the agent's ServiceAccount and Role in it, as on
// a real host cluster. envtest alone leaves it Terminating, which hid that
// a removal could hang for good.

func createHeldWork(t *testing.T, flotilla flotillaclient.Interface, ns, name string) {
	t.Helper()
	if _, err := flotilla.WorkV1alpha1().Works(ns).Create(context.Background(), &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Finalizers: []string{workv1alpha1.ExecutionFinalizer}}, Spec: oneConfigMap}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setReady(t *testing.T, flotilla flotillaclient.Interface, name string, status metav1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: status, Reason: "Test"})
		_, err = flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("setting %s Ready=%s: %v", name, status, err)
	}
}

// waitRemoved waits until the Cluster, its namespace and its
// ClusterRoleBinding are gone.
func waitRemoved(t *testing.T, env *testenv.Env, flotilla flotillaclient.Interface, name string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	var state string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, cErr := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		ns, nsErr := env.Kube.CoreV1().Namespaces().Get(ctx, clusterlifecycle.Namespace(name), metav1.GetOptions{})
		_, crbErr := env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, clusterlifecycle.AgentClusterRoleName(name), metav1.GetOptions{})
		state = "Cluster: " + errString(cErr) + "; ClusterRoleBinding: " + errString(crbErr) + "; namespace: " + errString(nsErr)
		if nsErr == nil {
			state += " " + string(ns.Status.Phase)
			for _, c := range ns.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					state += " (" + c.Message + ")"
				}
			}
		}
		return apierrors.IsNotFound(cErr) && apierrors.IsNotFound(nsErr) && apierrors.IsNotFound(crbErr), nil
	})
	if err != nil {
		t.Fatalf("cluster %s was not removed within %s: %s", name, timeout, state)
	}
}

func errString(err error) string {
	if err == nil {
		return "present"
	}
	if apierrors.IsNotFound(err) {
		return "gone"
	}
	return err.Error()
}

// reRegisterWorks registers name again and checks that it gets its
// namespace, Lease and identity, and that the identity works.
func reRegisterWorks(t *testing.T, env *testenv.Env, flotilla flotillaclient.Interface, name string) {
	t.Helper()
	register(t, flotilla, env, name)
	agent := flotillaclient.NewForConfigOrDie(agentConfig(t, env, name))
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := agent.WorkV1alpha1().Works(clusterlifecycle.Namespace(name)).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the re-registered cluster's agent identity cannot list its Works")
	}
}

func waitEvent(t *testing.T, rec *record.FakeRecorder, reason string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within %s", reason, timeout)
			return ""
		}
	}
}

// Removing a cluster that is not Ready (its agent cannot release its
// Works) completes at once: the hub releases the Works' finalizers (their
// member objects stay), the namespace really goes, the identity with it,
// and a cluster registered again under the name gets a working identity.
func TestRemovingAClusterThatIsNotReadyCompletes(t *testing.T) {
	env := testenv.Start(t, testenv.WithControllerManager())
	rec := record.NewFakeRecorder(100)
	flotilla := startControllerWith(t, env, clusterlifecycle.Options{Recorder: rec})
	register(t, flotilla, env, "gone")
	ns := clusterlifecycle.Namespace("gone")
	createHeldWork(t, flotilla, ns, "stuck")
	if err := flotilla.ClusterV1alpha1().Clusters().Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, env, flotilla, "gone", 60*time.Second)
	if e := waitEvent(t, rec, clusterlifecycle.EventWorksAbandoned, time.Second); !strings.Contains(e, "not Ready") {
		t.Errorf("event %q does not say the cluster was not Ready", e)
	}
	reRegisterWorks(t, env, flotilla, "gone")
}

// A Ready cluster whose agent never releases its Works (dead since its
// last report, or stuck): the hub deletes the Works and waits for the
// agent with the identity in place (the namespace and the ServiceAccount
// stay), and after the timeout releases the Works itself; then the
// namespace and the identity go, and the name can be registered again.
func TestRemovingAReadyClusterWaitsForItsAgentThenReleasesItsWorks(t *testing.T) {
	env := testenv.Start(t, testenv.WithControllerManager())
	rec := record.NewFakeRecorder(100)
	const timeout = 6 * time.Second
	flotilla := startControllerWith(t, env, clusterlifecycle.Options{Recorder: rec, WorkReleaseTimeout: timeout})
	register(t, flotilla, env, "silent")
	setReady(t, flotilla, "silent", metav1.ConditionTrue)
	ctx := context.Background()
	ns := clusterlifecycle.Namespace("silent")
	for _, w := range []string{"a", "b"} {
		createHeldWork(t, flotilla, ns, w)
	}
	if err := flotilla.ClusterV1alpha1().Clusters().Delete(ctx, "silent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// While the agent has time to release, its Works are being deleted and
	// everything it needs to release them stays.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout/2, true, func(ctx context.Context) (bool, error) {
		works, err := flotilla.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(works.Items) != 2 {
			return false, err
		}
		for _, w := range works.Items {
			if w.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the removed cluster's Works were not deleted: %v", err)
	}
	for time.Since(deleted) < timeout-2*time.Second {
		n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil {
			t.Fatalf("the namespace went (%v) while the agent could still release its Works", err)
		}
		if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{}); err != nil {
			t.Fatalf("the agent's ServiceAccount went (%v) while it could still release its Works", err)
		}
		if _, err := env.Kube.RbacV1().RoleBindings(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{}); err != nil {
			t.Fatalf("the agent's RoleBinding went (%v) while it could still release its Works", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitRemoved(t, env, flotilla, "silent", timeout+60*time.Second)
	if took := time.Since(deleted); took < timeout {
		t.Errorf("removed after %s, before the %s the agent has to release its Works", took, timeout)
	}
	if e := waitEvent(t, rec, clusterlifecycle.EventWorksAbandoned, time.Second); !strings.Contains(e, "did not release them within") {
		t.Errorf("event %q does not say the agent did not release the Works in time", e)
	}
	reRegisterWorks(t, env, flotilla, "silent")
}

// A cluster namespace deleted by hand (or left Terminating by an older
// hub's removal) while Works in it hold their finalizer: the agent's
// identity goes with the namespace, so nothing would release them. After
// the timeout the hub releases them, the namespace goes, and the hub makes
// namespace and identity again.
func TestAStuckClusterNamespaceIsReleasedAndMadeAgain(t *testing.T) {
	env := testenv.Start(t, testenv.WithControllerManager())
	rec := record.NewFakeRecorder(100)
	flotilla := startControllerWith(t, env, clusterlifecycle.Options{Recorder: rec, WorkReleaseTimeout: 3 * time.Second})
	register(t, flotilla, env, "m")
	setReady(t, flotilla, "m", metav1.ConditionTrue)
	ctx := context.Background()
	ns := clusterlifecycle.Namespace("m")
	createHeldWork(t, flotilla, ns, "w")
	old, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.UID == old.UID {
			return false, nil
		}
		_, err = env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the stuck namespace was not removed and made again with the agent's identity")
	}
	waitEvent(t, rec, clusterlifecycle.EventWorksAbandoned, time.Second)
}
