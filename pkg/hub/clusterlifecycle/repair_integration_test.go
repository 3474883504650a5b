package clusterlifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusterevents"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillascheme "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// hubIdentity installs the hub's shipped RBAC and admission policy
// (manifests/hub) and returns a config acting as the hub's ServiceAccount,
// so a test proves the manifests let the controller do its job.
func hubIdentity(t *testing.T, env *testenv.Env) *rest.Config {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml"} {
		if err := env.ApplyFile(ctx, filepath.Join(env.Root, "manifests", "hub", f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flotilla-system:flotilla-hub",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flotilla-system", "system:authenticated"}}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// lifecycleHub runs the cluster-lifecycle controller as the hub would: its
// own RBAC, label-selected informers, a real event recorder wrapped by
// clusterevents. requests counts every API request the controller itself
// makes (the informers have a client of their own).
type lifecycleHub struct {
	requests atomic.Int64
	metrics  *hubmetrics.Metrics
}

func startLifecycleHub(t *testing.T, env *testenv.Env, cfg *rest.Config, resync time.Duration) *lifecycleHub {
	t.Helper()
	h := &lifecycleHub{metrics: hubmetrics.New(prometheus.NewRegistry())}
	counted := rest.CopyConfig(cfg)
	counted.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { h.requests.Add(1); return rt.RoundTrip(r) })
	}
	informerKube := kubernetes.NewForConfigOrDie(cfg)
	factory := flotillainformers.NewSharedInformerFactory(flotillaclient.NewForConfigOrDie(cfg), 0)
	owned := informers.NewSharedInformerFactoryWithOptions(informerKube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterlifecycle.LabelCluster }))
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: informerKube.CoreV1().Events("")})
	recorder := clusterevents.Recorder(broadcaster.NewRecorder(flotillascheme.Scheme, corev1.EventSource{Component: "flotilla-hub"}))
	c := clusterlifecycle.NewController(kubernetes.NewForConfigOrDie(counted), flotillaclient.NewForConfigOrDie(counted),
		factory.Cluster().V1alpha1().Clusters().Informer(), owned,
		clusterlifecycle.Options{ResyncPeriod: resync, Recorder: recorder, Metrics: h.metrics})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	owned.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown(); owned.Shutdown(); broadcaster.Shutdown() })
	return h
}

func poll(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// The hub puts back, within moments, every object it made for a cluster
// that is deleted or changed by hand — namespace, Lease, ServiceAccount,
// Role, RoleBinding, ClusterRole, ClusterRoleBinding — under its own shipped
// RBAC; it removes the events RBAC older hubs made in "default"; and a
// cluster whose objects are in place costs no API request at all, resync
// after resync.
func TestHubPutsBackWhatWasDeletedOrChanged(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	const resync = 300 * time.Millisecond
	h := startLifecycleHub(t, env, hubIdentity(t, env), resync)
	admin := env.Kube
	flotilla, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	name, ns := "member1", clusterlifecycle.Namespace("member1")

	// What an older hub left in "default" for this cluster's agent.
	legacy := "flotilla-agent-events:" + name
	labels := map[string]string{clusterlifecycle.LabelCluster: name}
	if _, err := admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: legacy, Labels: labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: legacy, Labels: labels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: legacy},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: clusterlifecycle.AgentServiceAccount, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	register(t, flotilla, env, name)
	poll(t, 10*time.Second, "the legacy events RBAC in default removed", func(ctx context.Context) (bool, error) {
		_, errRole := admin.RbacV1().Roles("default").Get(ctx, legacy, metav1.GetOptions{})
		_, errBinding := admin.RbacV1().RoleBindings("default").Get(ctx, legacy, metav1.GetOptions{})
		return apierrors.IsNotFound(errRole) && apierrors.IsNotFound(errBinding), nil
	})

	// Steady state: wait for the writes of registration to end, then ten
	// resyncs must cost nothing (the caches answer every check).
	var last int64 = -1
	poll(t, 15*time.Second, "the controller to go quiet", func(ctx context.Context) (bool, error) {
		n := h.requests.Load()
		quiet := n == last
		last = n
		if !quiet {
			time.Sleep(3 * resync)
		}
		return quiet, nil
	})
	before := h.requests.Load()
	if before == 0 {
		t.Fatal("no request of the controller was counted: the steady-state check would prove nothing")
	}
	for end := time.Now().Add(10 * resync); time.Now().Before(end); time.Sleep(resync / 3) {
		if n := h.requests.Load(); n != before {
			t.Fatalf("a cluster whose objects are in place cost %d API requests in resyncs", n-before)
		}
	}

	rbac, core := admin.RbacV1(), admin.CoreV1()
	type check struct {
		what   string
		breakf func() (types.UID, error)
		fixed  func(ctx context.Context, old types.UID) (bool, error)
	}
	remade := func(get func(ctx context.Context) (metav1.Object, error)) func(context.Context, types.UID) (bool, error) {
		return func(ctx context.Context, old types.UID) (bool, error) {
			o, err := get(ctx)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && o.GetUID() != old && o.GetLabels()[clusterlifecycle.LabelCluster] == name, err
		}
	}
	deleteAndUID := func(get func(ctx context.Context) (metav1.Object, error), del func(ctx context.Context) error) func() (types.UID, error) {
		return func() (types.UID, error) {
			o, err := get(ctx)
			if err != nil {
				return "", err
			}
			return o.GetUID(), del(ctx)
		}
	}
	getLease := func(ctx context.Context) (metav1.Object, error) {
		return admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	}
	getSA := func(ctx context.Context) (metav1.Object, error) {
		return core.ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
	}
	getRole := func(ctx context.Context) (metav1.Object, error) {
		return rbac.Roles(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
	}
	getRB := func(ctx context.Context) (metav1.Object, error) {
		return rbac.RoleBindings(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
	}
	crName := clusterlifecycle.AgentClusterRoleName(name)
	getCR := func(ctx context.Context) (metav1.Object, error) {
		return rbac.ClusterRoles().Get(ctx, crName, metav1.GetOptions{})
	}
	getCRB := func(ctx context.Context) (metav1.Object, error) {
		return rbac.ClusterRoleBindings().Get(ctx, crName, metav1.GetOptions{})
	}
	sameAs := func(want func(ctx context.Context) (bool, error)) func(context.Context, types.UID) (bool, error) {
		return func(ctx context.Context, _ types.UID) (bool, error) { return want(ctx) }
	}
	agentSubject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: clusterlifecycle.AgentServiceAccount, Namespace: ns}}
	intruder := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "intruder"}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	checks := []check{
		{"deleted Lease", deleteAndUID(getLease, func(ctx context.Context) error {
			return admin.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}), remade(getLease)},
		{"deleted ServiceAccount", deleteAndUID(getSA, func(ctx context.Context) error {
			return core.ServiceAccounts(ns).Delete(ctx, clusterlifecycle.AgentServiceAccount, metav1.DeleteOptions{})
		}), remade(getSA)},
		{"ServiceAccount stripped of its label (out of the hub's sight)", func() (types.UID, error) {
			sa, err := core.ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			sa.Labels = nil
			_, err = core.ServiceAccounts(ns).Update(ctx, sa, metav1.UpdateOptions{})
			return sa.UID, err
		}, func(ctx context.Context, old types.UID) (bool, error) {
			sa, err := core.ServiceAccounts(ns).Get(ctx, clusterlifecycle.AgentServiceAccount, metav1.GetOptions{})
			return err == nil && sa.UID == old && sa.Labels[clusterlifecycle.LabelCluster] == name, err
		}},
		{"Role widened", func() (types.UID, error) {
			r, err := rbac.Roles(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			r.Rules = append(r.Rules, secrets)
			_, err = rbac.Roles(ns).Update(ctx, r, metav1.UpdateOptions{})
			return r.UID, err
		}, sameAs(func(ctx context.Context) (bool, error) {
			r, err := rbac.Roles(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
			return err == nil && equality.Semantic.DeepEqual(r.Rules, clusterlifecycle.AgentNamespaceRules(name)), err
		})},
		{"deleted Role", deleteAndUID(getRole, func(ctx context.Context) error {
			return rbac.Roles(ns).Delete(ctx, clusterlifecycle.AgentRoleName, metav1.DeleteOptions{})
		}), remade(getRole)},
		{"RoleBinding given another subject", func() (types.UID, error) {
			b, err := rbac.RoleBindings(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			b.Subjects = append(b.Subjects, intruder)
			_, err = rbac.RoleBindings(ns).Update(ctx, b, metav1.UpdateOptions{})
			return b.UID, err
		}, sameAs(func(ctx context.Context) (bool, error) {
			b, err := rbac.RoleBindings(ns).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
			return err == nil && equality.Semantic.DeepEqual(b.Subjects, agentSubject), err
		})},
		{"deleted RoleBinding", deleteAndUID(getRB, func(ctx context.Context) error {
			return rbac.RoleBindings(ns).Delete(ctx, clusterlifecycle.AgentRoleName, metav1.DeleteOptions{})
		}), remade(getRB)},
		{"ClusterRole widened", func() (types.UID, error) {
			r, err := rbac.ClusterRoles().Get(ctx, crName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			r.Rules = append(r.Rules, secrets)
			_, err = rbac.ClusterRoles().Update(ctx, r, metav1.UpdateOptions{})
			return r.UID, err
		}, sameAs(func(ctx context.Context) (bool, error) {
			r, err := rbac.ClusterRoles().Get(ctx, crName, metav1.GetOptions{})
			return err == nil && equality.Semantic.DeepEqual(r.Rules, clusterlifecycle.AgentClusterRules(name)), err
		})},
		{"deleted ClusterRole", deleteAndUID(getCR, func(ctx context.Context) error {
			return rbac.ClusterRoles().Delete(ctx, crName, metav1.DeleteOptions{})
		}), remade(getCR)},
		{"deleted ClusterRoleBinding", deleteAndUID(getCRB, func(ctx context.Context) error {
			return rbac.ClusterRoleBindings().Delete(ctx, crName, metav1.DeleteOptions{})
		}), remade(getCRB)},
		// No namespace controller runs here: finalize the namespace by
		// hand, as it would once empty.
		{"deleted namespace", deleteAndUID(func(ctx context.Context) (metav1.Object, error) {
			return core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		}, func(ctx context.Context) error {
			if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
				return err
			}
			n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Finalizers = nil
			_, err = core.Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
			return err
		}), remade(func(ctx context.Context) (metav1.Object, error) {
			return core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		})},
	}
	for _, c := range checks {
		old, err := c.breakf()
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		poll(t, 5*time.Second, "the hub to repair a "+c.what, func(ctx context.Context) (bool, error) { return c.fixed(ctx, old) })
	}
	var m dto.Metric
	if err := h.metrics.ClusterObjectWrites.WithLabelValues("Lease", "create").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 2 {
		t.Errorf("flotilla_hub_cluster_object_writes_total{kind=Lease,operation=create} = %v, want 2 (registration and repair)", n)
	}

	// The repairs were reported on the Cluster, in its namespace.
	poll(t, 10*time.Second, "a HubObjectsRepaired event in "+ns, func(ctx context.Context) (bool, error) {
		return hasClusterEvent(ctx, admin, ns, name, clusterlifecycle.EventObjectsRepaired)
	})
	if found, err := hasClusterEvent(ctx, admin, "default", name, ""); err != nil || found {
		t.Errorf("events about Cluster %s in default (err %v): they belong in %s", name, err, ns)
	}
}

// hasClusterEvent reports whether ns holds an event about Cluster name
// (reason "" matches any).
func hasClusterEvent(ctx context.Context, kube kubernetes.Interface, ns, name, reason string) (bool, error) {
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "Cluster" && e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason)
	}), nil
}

// The agent's events about its Cluster are recorded, with its own narrow
// identity, in the cluster's namespace (it may write no events elsewhere).
func TestAgentEventsLiveInTheClusterNamespace(t *testing.T) {
	env := testenv.Start(t)
	flotilla := startController(t, env)
	register(t, flotilla, env, "member1")
	ctx := context.Background()
	cluster, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorder, stop := hubconn.NewEventRecorder(kubernetes.NewForConfigOrDie(agentConfig(t, env, "member1")), "flotilla-agent")
	defer stop()
	recorder.Eventf(cluster, corev1.EventTypeNormal, "ClusterIDSet", "spec.id set to %s", "uid-1")
	ns := clusterlifecycle.Namespace("member1")
	poll(t, 10*time.Second, fmt.Sprintf("the agent's event about its Cluster in %s", ns), func(ctx context.Context) (bool, error) {
		return hasClusterEvent(ctx, env.Kube, ns, "member1", "ClusterIDSet")
	})
	events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Cluster" && (e.InvolvedObject.Namespace != ns || e.InvolvedObject.UID != cluster.UID ||
			e.InvolvedObject.APIVersion != clusterv1alpha1.SchemeGroupVersion.String()) {
			t.Errorf("event %s refers to %+v, want Cluster member1 (uid %s) in %s", e.Name, e.InvolvedObject, cluster.UID, ns)
		}
	}
}
