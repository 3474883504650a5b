package clusterlifecycle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var oneConfigMap = workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{
	{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`)}}}}}

func startController(t *testing.T, env *testenv.Env) flotillaclient.Interface {
	t.Helper()
	return startControllerWith(t, env, clusterlifecycle.Options{Recorder: record.NewFakeRecorder(100)})
}

func startControllerWith(t *testing.T, env *testenv.Env, opts clusterlifecycle.Options) flotillaclient.Interface {
	t.Helper()
	flotilla, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	factory := flotillainformers.NewSharedInformerFactory(flotilla, 0)
	owned := informers.NewSharedInformerFactoryWithOptions(env.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterlifecycle.LabelCluster }))
	c := clusterlifecycle.NewController(env.Kube, flotilla, factory.Cluster().V1alpha1().Clusters().Informer(), owned, opts)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	owned.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown(); owned.Shutdown() })
	return flotilla
}

func register(t *testing.T, flotilla flotillaclient.Interface, env *testenv.Env, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, errSA := env.Kube.CoreV1().ServiceAccounts(clusterlifecycle.Namespace(name)).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
		_, errLease := env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace(name)).Get(ctx, name, metav1.GetOptions{})
		_, errCRB := env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, clusterlifecycle.AgentClusterRoleName(name), metav1.GetOptions{})
		return errSA == nil && errLease == nil && errCRB == nil, nil
	})
	if err != nil {
		t.Fatalf("cluster %s: namespace, Lease and identity never appeared", name)
	}
}

// agentConfig authenticates as the cluster's agent identity with a token from
// the TokenRequest API, the way `hub agent-kubeconfig` does.
func agentConfig(t *testing.T, env *testenv.Env, cluster string) *rest.Config {
	t.Helper()
	tr, err := env.Kube.CoreV1().ServiceAccounts(clusterlifecycle.Namespace(cluster)).CreateToken(context.Background(),
		clusterlifecycle.AgentServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// The agent identity may do exactly its job on the hub, with the real
// authorizer: its own Lease, Works, Cluster and events — nothing of another
// cluster's, no Secrets, no listing of Clusters, no creating Works.
func TestAgentIdentityIsLeastPrivilege(t *testing.T) {
	env := testenv.Start(t)
	flotilla := startController(t, env)
	register(t, flotilla, env, "member1")
	register(t, flotilla, env, "member2")
	ctx := context.Background()
	ns1, ns2 := clusterlifecycle.Namespace("member1"), clusterlifecycle.Namespace("member2")
	for _, ns := range []string{ns1, ns2} {
		if _, err := flotilla.WorkV1alpha1().Works(ns).Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns,
			Finalizers: []string{workv1alpha1.ExecutionFinalizer}}, Spec: oneConfigMap}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := agentConfig(t, env, "member1")
	kube := kubernetes.NewForConfigOrDie(cfg)
	agent := flotillaclient.NewForConfigOrDie(cfg)

	allowed := map[string]func() error{
		"renew its Lease": func() error {
			l, err := kube.CoordinationV1().Leases(ns1).Get(ctx, "member1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err = kube.CoordinationV1().Leases(ns1).Update(ctx, l, metav1.UpdateOptions{})
			return err
		},
		"list its Works": func() error { _, err := agent.WorkV1alpha1().Works(ns1).List(ctx, metav1.ListOptions{}); return err },
		"read ResourceInterpreterCustomizations": func() error {
			_, err := agent.ConfigV1alpha1().ResourceInterpreterCustomizations().List(ctx, metav1.ListOptions{})
			return err
		},
		"renew its own hub token": func() error {
			return requestToken(kube, ns1, clusterlifecycle.AgentServiceAccount)
		},
		"finish its Work": func() error {
			w, err := agent.WorkV1alpha1().Works(ns1).Get(ctx, "w", metav1.GetOptions{})
			if err != nil {
				return err
			}
			// The agent may only remove Flotilla's finalizer
			// (flotilla-agent-work-scope), which the hub put there.
			w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
			if w, err = agent.WorkV1alpha1().Works(ns1).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
				return err
			}
			_, err = agent.WorkV1alpha1().Works(ns1).UpdateStatus(ctx, w, metav1.UpdateOptions{})
			return err
		},
		"update its Cluster and status": func() error {
			c, err := agent.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Spec.ID = "uid-1"
			if c, err = agent.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
			_, err = agent.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		},
		"record events about its Cluster in its namespace": func() error {
			_, err := kube.CoreV1().Events(ns1).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "e-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Name: "member1", Namespace: ns1}, Reason: "Test", Message: "m"}, metav1.CreateOptions{})
			return err
		},
	}
	for what, f := range allowed {
		if err := f(); err != nil {
			t.Errorf("member1's agent may %s, got %v", what, err)
		}
	}
	forbidden := map[string]func() error{
		"read member2's Works": func() error { _, err := agent.WorkV1alpha1().Works(ns2).List(ctx, metav1.ListOptions{}); return err },
		"read member2's Lease": func() error {
			_, err := kube.CoordinationV1().Leases(ns2).Get(ctx, "member2", metav1.GetOptions{})
			return err
		},
		"update member2's Cluster": func() error {
			_, err := agent.ClusterV1alpha1().Clusters().UpdateStatus(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}}, metav1.UpdateOptions{})
			return err
		},
		"list Clusters": func() error { _, err := agent.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{}); return err },
		"read Secrets":  func() error { _, err := kube.CoreV1().Secrets(ns1).List(ctx, metav1.ListOptions{}); return err },
		"request a token for member2's agent": func() error {
			return requestToken(kube, ns2, clusterlifecycle.AgentServiceAccount)
		},
		"request a token for another ServiceAccount of its namespace": func() error {
			if _, err := env.Kube.CoreV1().ServiceAccounts(ns1).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
				metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			return requestToken(kube, ns1, "other")
		},
		"create Works": func() error {
			_, err := agent.WorkV1alpha1().Works(ns1).Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"delete its Work": func() error { return agent.WorkV1alpha1().Works(ns1).Delete(ctx, "w", metav1.DeleteOptions{}) },
		"write a ResourceInterpreterCustomization": func() error {
			_, err := agent.ConfigV1alpha1().ResourceInterpreterCustomizations().Create(ctx, &configv1alpha1.ResourceInterpreterCustomization{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
					Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"}}}, metav1.CreateOptions{})
			return err
		},
		// Events about Clusters live in each cluster's namespace
		// (clusterevents): none in the shared "default", none in another's.
		"create events in default": func() error {
			_, err := kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "e-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Name: "member1"}, Reason: "Test", Message: "m"}, metav1.CreateOptions{})
			return err
		},
		"create events about member2": func() error {
			_, err := kube.CoreV1().Events(ns2).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "e-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Name: "member2", Namespace: ns2}, Reason: "Test", Message: "m"}, metav1.CreateOptions{})
			return err
		},
		"create other Leases": func() error {
			_, err := kube.CoordinationV1().Leases(ns1).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
	}
	for what, f := range forbidden {
		if err := f(); !apierrors.IsForbidden(err) {
			t.Errorf("member1's agent must be Forbidden to %s, got %v", what, err)
		}
	}

	// What RBAC cannot express, the admission policy
	// flotilla-agent-cluster-scope refuses: the agent may update its own
	// Cluster, but not the fields that decide placement or the hub's.
	admin, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	if admin, err = flotilla.ClusterV1alpha1().Clusters().Update(ctx, admin, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	admin.Status.RemedyActions = []string{"TrafficControl"}
	if _, err = flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, admin, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changeOwnCluster := func(change func(*clusterv1alpha1.Cluster), status bool) error {
		c, err := agent.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(c)
		if status {
			_, err = agent.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		} else {
			_, err = agent.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		}
		return err
	}
	for what, f := range map[string]func() error{
		"relabel its Cluster": func() error {
			return changeOwnCluster(func(c *clusterv1alpha1.Cluster) { c.Labels = map[string]string{"env": "prod"} }, false)
		},
		"move its Cluster to another region": func() error {
			return changeOwnCluster(func(c *clusterv1alpha1.Cluster) { c.Spec.Region = "elsewhere" }, false)
		},
		"drop its Cluster's taints": func() error {
			return changeOwnCluster(func(c *clusterv1alpha1.Cluster) { c.Spec.Taints = nil }, false)
		},
		"clear its remedy actions": func() error {
			return changeOwnCluster(func(c *clusterv1alpha1.Cluster) { c.Status.RemedyActions = nil }, true)
		},
	} {
		// Admission policies take effect asynchronously after install: poll.
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for err = f(); !apierrors.IsForbidden(err) && time.Now().Before(deadline); err = f() {
			time.Sleep(200 * time.Millisecond)
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "flotilla-agent-cluster-scope") {
			t.Errorf("member1's agent must be refused by flotilla-agent-cluster-scope to %s, got %v", what, err)
		}
	}
}
