// Package clusterlifecycle is the hub's cluster controller: for every Cluster
// it keeps the cluster's hub namespace (flotilla-es-<cluster>), the Lease the
// agent renews there, and the agent's least-privilege identity, and it tears
// them down when the Cluster is deleted — without letting a dead cluster's
// Works hold the deletion forever (Karmada issue #1847).
package clusterlifecycle

import (
	"context"
	"fmt"
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/util/queueworker"
)

const (
	// Finalizer holds a Cluster until its namespace and identity are gone.
	Finalizer = "flotilla.io/cluster-controller"
	// AgentServiceAccount is the agent identity's name in the cluster namespace.
	AgentServiceAccount = "flotilla-agent"
	// LabelCluster names the Cluster an object on the hub belongs to.
	LabelCluster = "cluster.flotilla.io/name"
	// DefaultLeaseDurationSeconds is written into a new cluster Lease; the
	// agent overwrites it with its own --cluster-lease-duration.
	DefaultLeaseDurationSeconds = 40
)

// Namespace is a cluster's namespace on the hub.
func Namespace(cluster string) string { return "flotilla-es-" + cluster }

// AgentClusterRoleName is the cluster-scoped role of a cluster's agent.
func AgentClusterRoleName(cluster string) string { return "flotilla:agent:" + cluster }

// Controller reconciles Clusters.
type Controller struct {
	kube     kubernetes.Interface
	flotilla flotillaclient.Interface
	clusters clusterlisters.ClusterLister
	synced   cache.InformerSynced
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	// ensured holds the UIDs of Clusters whose objects this hub process has
	// already made, so a resync costs no requests.
	ensured sync.Map
}

// NewController returns a Controller fed by a Cluster informer.
func NewController(kube kubernetes.Interface, flotilla flotillaclient.Interface, clusters cache.SharedIndexInformer, recorder record.EventRecorder) *Controller {
	c := &Controller{kube: kube, flotilla: flotilla, clusters: clusterlisters.NewClusterLister(clusters.GetIndexer()),
		synced: clusters.HasSynced, recorder: recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cluster-lifecycle"})}
	enqueue := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
			c.queue.Add(cl.Name)
		}
	}
	_, _ = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*clusterv1alpha1.Cluster), cur.(*clusterv1alpha1.Cluster)
			// Status and spec changes (agent reports, taints) are not this
			// controller's business: only deletion and finalizers are.
			if !equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) || !slices.Equal(o.Finalizers, n.Finalizers) {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	})
	return c
}

// Run reconciles with workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("cluster-lifecycle", ctx.Done(), c.synced) {
		return
	}
	queueworker.Run(ctx, "cluster-lifecycle", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cluster, err := c.clusters.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cluster.DeletionTimestamp != nil {
		return c.teardown(ctx, cluster)
	}
	if !slices.Contains(cluster.Finalizers, Finalizer) {
		updated := cluster.DeepCopy()
		updated.Finalizers = append(updated.Finalizers, Finalizer)
		_, err := c.flotilla.ClusterV1alpha1().Clusters().Update(ctx, updated, metav1.UpdateOptions{})
		return err
	}
	if _, done := c.ensured.Load(cluster.UID); done {
		return nil
	}
	if err := c.ensure(ctx, cluster); err != nil {
		return err
	}
	c.ensured.Store(cluster.UID, struct{}{})
	return nil
}

// ensure creates what a Cluster needs on the hub; existing objects are kept
// (the agent renews the Lease; an admin may have annotated the namespace).
func (c *Controller) ensure(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	ns := Namespace(cluster.Name)
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(cluster, clusterv1alpha1.SchemeGroupVersion.WithKind("Cluster"))}
	labels := map[string]string{LabelCluster: cluster.Name}
	create := func(what string, f func() error) error {
		if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s for cluster %s: %w", what, cluster.Name, err)
		}
		return nil
	}
	steps := []struct {
		what string
		f    func() error
	}{
		{"namespace", func() error {
			_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels, OwnerReferences: owner}}, metav1.CreateOptions{})
			return err
		}},
		{"lease", func() error {
			_, err := c.kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: cluster.Name, Namespace: ns, Labels: labels},
				Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](DefaultLeaseDurationSeconds)}}, metav1.CreateOptions{})
			return err
		}},
		{"service account", func() error {
			_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: ns, Labels: labels}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := create(s.what, s.f); err != nil {
			return err
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AgentServiceAccount, Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent", Namespace: ns, Labels: labels}, Rules: AgentNamespaceRules(cluster.Name)}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent", Namespace: ns, Labels: labels},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, Subjects: subject}
	// Events about the cluster-scoped Cluster can only live in "default".
	eventsName := "flotilla-agent-events:" + cluster.Name
	eventsRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: eventsName, Namespace: metav1.NamespaceDefault, Labels: labels, OwnerReferences: owner},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}}
	eventsBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: eventsName, Namespace: metav1.NamespaceDefault, Labels: labels, OwnerReferences: owner},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: eventsName}, Subjects: subject}
	clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: AgentClusterRoleName(cluster.Name), Labels: labels, OwnerReferences: owner},
		Rules: AgentClusterRules(cluster.Name)}
	clusterBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: AgentClusterRoleName(cluster.Name), Labels: labels, OwnerReferences: owner},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name}, Subjects: subject}

	rbac := c.kube.RbacV1()
	for _, r := range []*rbacv1.Role{role, eventsRole} {
		if err := applyRole(ctx, c.kube, r); err != nil {
			return err
		}
	}
	for _, b := range []*rbacv1.RoleBinding{binding, eventsBinding} {
		if err := create("role binding", func() error {
			_, err := rbac.RoleBindings(b.Namespace).Create(ctx, b, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	existing, err := rbac.ClusterRoles().Get(ctx, clusterRole.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = rbac.ClusterRoles().Create(ctx, clusterRole, metav1.CreateOptions{})
	case err == nil && !equality.Semantic.DeepEqual(existing.Rules, clusterRole.Rules):
		existing.Rules = clusterRole.Rules
		_, err = rbac.ClusterRoles().Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return create("cluster role binding", func() error {
		_, err := rbac.ClusterRoleBindings().Create(ctx, clusterBinding, metav1.CreateOptions{})
		return err
	})
}

func applyRole(ctx context.Context, kube kubernetes.Interface, role *rbacv1.Role) error {
	roles := kube.RbacV1().Roles(role.Namespace)
	existing, err := roles.Get(ctx, role.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = roles.Create(ctx, role, metav1.CreateOptions{})
	case err == nil && !equality.Semantic.DeepEqual(existing.Rules, role.Rules):
		existing.Rules = role.Rules
		_, err = roles.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role %s/%s: %w", role.Namespace, role.Name, err)
	}
	return nil
}

// AgentNamespaceRules are what a cluster's agent may do in its namespace:
// renew its Lease, read and finish its Works, report their status, record
// events, and renew its own hub token (TokenRequest for its own
// ServiceAccount only, pkg/agent/hubtoken). Nothing else.
func AgentNamespaceRules(cluster string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{cluster}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{AgentServiceAccount}, Verbs: []string{"create"}},
		{APIGroups: []string{workv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"works"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{workv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"works/status"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// AgentClusterRules let the agent read and report its own Cluster only.
func AgentClusterRules(cluster string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{clusterv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"clusters", "clusters/status"},
			ResourceNames: []string{cluster}, Verbs: []string{"get", "update", "patch"}},
	}
}

// teardown removes the cluster's namespace (Works, Lease, identity with it)
// and then the finalizer. A cluster that is not Ready cannot release its
// Works, so their finalizers are removed first: its member objects stay as
// they are (the agent, if it ever returns, finds them orphaned and applies
// its orphan grace period).
func (c *Controller) teardown(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	if !slices.Contains(cluster.Finalizers, Finalizer) {
		return nil
	}
	ns := Namespace(cluster.Name)
	if !meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
		works, err := c.flotilla.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if works != nil {
			for i := range works.Items {
				w := &works.Items[i]
				if !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
					continue
				}
				w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
				if _, err := c.flotilla.WorkV1alpha1().Works(ns).Update(ctx, w, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			if len(works.Items) > 0 && c.recorder != nil {
				c.recorder.Eventf(cluster, corev1.EventTypeWarning, "WorksAbandoned",
					"cluster is not Ready: released %d Works without waiting for its agent; objects on the member are left as they are", len(works.Items))
			}
		}
	}
	// Deleting the namespace takes the Works (their finalizers run while the
	// agent is alive), the Lease and the agent's ServiceAccount and Role with
	// it; the namespace controller finishes that on its own, so the Cluster
	// need not wait. A Cluster re-registered meanwhile waits for it.
	err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The ClusterRole, its binding and the events Role are owned by the
	// Cluster: the garbage collector removes them with it.
	updated := cluster.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == Finalizer })
	_, err = c.flotilla.ClusterV1alpha1().Clusters().Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
