// Package clusterlifecycle is the hub's cluster controller: for every Cluster
// it keeps the cluster's hub namespace (flotilla-es-<cluster>), the Lease the
// agent renews there, and the agent's least-privilege identity, and it tears
// them down when the Cluster is deleted, in an order that lets a live agent
// release its Works (the identity goes last) and without letting a dead
// cluster's Works hold the deletion forever (Karmada issue #1847).
package clusterlifecycle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

const (
	// Finalizer holds a Cluster until its namespace and identity are gone.
	Finalizer = "flotilla.io/cluster-controller"
	// AgentServiceAccount is the agent identity's name in the cluster namespace.
	AgentServiceAccount = "flotilla-agent"
	// LabelCluster names the Cluster an object on the hub belongs to.
	LabelCluster = "cluster.flotilla.io/name"
	// EventObjectsRepaired is recorded on a Cluster when the hub had to put
	// back its namespace's Lease or the agent identity (deleted or changed).
	EventObjectsRepaired = "HubObjectsRepaired"
	// DefaultLeaseDurationSeconds is written into a new cluster Lease; the
	// agent overwrites it with its own --cluster-lease-duration.
	DefaultLeaseDurationSeconds = 40
)

// Namespace is a cluster's namespace on the hub.
func Namespace(cluster string) string { return "flotilla-es-" + cluster }

// AgentClusterRoleName is the cluster-scoped role of a cluster's agent.
func AgentClusterRoleName(cluster string) string { return "flotilla:agent:" + cluster }

// AgentRoleName names the agent's Role and RoleBinding in its cluster namespace.
const AgentRoleName = "flotilla-agent"

// legacyEventsName is the Role and RoleBinding in "default" that older hubs
// made so the agent could record events about its Cluster there; events
// about a Cluster now live in its own namespace (clusterevents), and these
// are deleted wherever found.
func legacyEventsName(cluster string) string { return "flotilla-agent-events:" + cluster }

// DefaultResyncPeriod is how often every cluster is checked against the
// caches when no watch event came (the backstop; deletions are seen at once).
const DefaultResyncPeriod = time.Minute

// Options configure the Controller.
type Options struct {
	// ResyncPeriod re-checks every Cluster's objects against the caches;
	// a check finds nothing to do without a single API request.
	ResyncPeriod time.Duration
	// WorkReleaseTimeout bounds how long a deleted Ready cluster's agent
	// may take to release its Works (DefaultWorkReleaseTimeout if 0); a
	// cluster that is not Ready has its Works released at once.
	WorkReleaseTimeout time.Duration
	Recorder           record.EventRecorder
	Metrics            *hubmetrics.Metrics
}

// Controller reconciles Clusters.
type Controller struct {
	kube     kubernetes.Interface
	flotilla flotillaclient.Interface
	opts     Options
	clusters clusterlisters.ClusterLister

	namespaces          corelisters.NamespaceLister
	leases              coordinationlisters.LeaseLister
	serviceAccounts     corelisters.ServiceAccountLister
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister

	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewController returns a Controller fed by a Cluster informer and by owned,
// an informer factory whose list options select the label LabelCluster (so
// the hub caches only the objects it made for clusters, never every
// ServiceAccount or Role of the host cluster). Watching them is what brings
// a deleted Lease, ServiceAccount, Role, binding or namespace back at once.
func NewController(kube kubernetes.Interface, flotilla flotillaclient.Interface, clusters cache.SharedIndexInformer,
	owned informers.SharedInformerFactory, opts Options) *Controller {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.WorkReleaseTimeout <= 0 {
		opts.WorkReleaseTimeout = DefaultWorkReleaseTimeout
	}
	core, rbac := owned.Core().V1(), owned.Rbac().V1()
	c := &Controller{kube: kube, flotilla: flotilla, opts: opts,
		clusters:            clusterlisters.NewClusterLister(clusters.GetIndexer()),
		namespaces:          core.Namespaces().Lister(),
		leases:              owned.Coordination().V1().Leases().Lister(),
		serviceAccounts:     core.ServiceAccounts().Lister(),
		roles:               rbac.Roles().Lister(),
		roleBindings:        rbac.RoleBindings().Lister(),
		clusterRoles:        rbac.ClusterRoles().Lister(),
		clusterRoleBindings: rbac.ClusterRoleBindings().Lister(),
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
	c.synced = append(c.synced, clusters.HasSynced)
	for _, inf := range []cache.SharedIndexInformer{core.Namespaces().Informer(), owned.Coordination().V1().Leases().Informer(),
		core.ServiceAccounts().Informer(), rbac.Roles().Informer(), rbac.RoleBindings().Informer(),
		rbac.ClusterRoles().Informer(), rbac.ClusterRoleBindings().Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueueOwner,
			UpdateFunc: func(old, cur any) {
				// The agent renews its Lease every few seconds: only a change
				// of labels (or owners) concerns this controller.
				o, n := old.(metav1.Object), cur.(metav1.Object)
				if _, lease := cur.(*coordinationv1.Lease); lease && maps.Equal(o.GetLabels(), n.GetLabels()) {
					return
				}
				if o.GetResourceVersion() != n.GetResourceVersion() {
					c.enqueueOwner(cur)
				}
			},
			DeleteFunc: c.enqueueOwner,
		})
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c
}

// enqueueOwner queues the Cluster an object was made for (its label).
func (c *Controller) enqueueOwner(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if o, ok := obj.(metav1.Object); ok && o.GetLabels()[LabelCluster] != "" {
		c.queue.Add(o.GetLabels()[LabelCluster])
	}
}

// Run reconciles with workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("cluster-lifecycle", ctx.Done(), c.synced...) {
		return
	}
	// The backstop: a check costs no request while everything is in place.
	go wait.UntilWithContext(ctx, func(context.Context) {
		list, _ := c.clusters.List(labels.Everything())
		for _, cl := range list {
			c.queue.Add(cl.Name)
		}
	}, c.opts.ResyncPeriod)
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
	return c.ensure(ctx, cluster)
}

// ensure makes the cluster's namespace, Lease and agent identity match what
// the hub decides, reading only the caches: a cluster whose objects are all
// in place costs no request. Whatever was deleted or changed by hand is put
// back; existing objects keep what others own (the agent renews the Lease;
// an admin may annotate the namespace).
func (c *Controller) ensure(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	d := desiredFor(cluster)
	name := cluster.Name
	ns := d.namespace.Name
	existingNS, nsErr := c.namespaces.Get(ns)
	if nsErr == nil && existingNS.DeletionTimestamp != nil {
		// Nothing can be created in a terminating namespace (deleted by
		// hand, or left by an older hub's removal of a Cluster of the same
		// name): its deletion event brings the cluster back; the retry is
		// a backstop, and Works its agent cannot release (its identity
		// goes with the namespace) lose their finalizers after the
		// timeout, so the namespace does go.
		c.queue.AddAfter(name, 5*time.Second)
		return c.releaseStuckWorks(ctx, cluster)
	}
	repairing := nsErr == nil // the namespace was there: anything missing was removed
	var done []string
	step := func(kind, op string, err error) error {
		if op != "" {
			done = append(done, op+" "+kind)
			if m := c.opts.Metrics; m != nil {
				m.ClusterObjectWrites.WithLabelValues(kind, op).Inc()
			}
		}
		return err
	}
	labelOnly := func(o metav1.Object) bool { return fixLabel(o, name) }
	owned := func(o metav1.Object) bool { return fixLabel(o, name) || fixOwner(o, d.owner) }
	kube, rbac := c.kube.CoreV1(), c.kube.RbacV1()

	var errs []error
	add := func(err error) { errs = append(errs, err) }

	op, err := reconcile(ctx, want[*corev1.Namespace]{kind: "Namespace", client: kube.Namespaces(), desired: d.namespace,
		cached: existingNS, cacheErr: nsErr, fix: func(o *corev1.Namespace) bool { return owned(o) }})
	if err := step("Namespace", op, err); err != nil {
		return err // nothing else can be made without it
	}
	lease, leaseErr := c.leases.Leases(ns).Get(name)
	op, err = reconcile(ctx, want[*coordinationv1.Lease]{kind: "Lease", client: c.kube.CoordinationV1().Leases(ns), desired: d.lease,
		cached: lease, cacheErr: leaseErr, fix: func(o *coordinationv1.Lease) bool { return labelOnly(o) }})
	add(step("Lease", op, err))
	sa, saErr := c.serviceAccounts.ServiceAccounts(ns).Get(AgentServiceAccount)
	op, err = reconcile(ctx, want[*corev1.ServiceAccount]{kind: "ServiceAccount", client: kube.ServiceAccounts(ns), desired: d.serviceAccount,
		cached: sa, cacheErr: saErr, fix: func(o *corev1.ServiceAccount) bool { return labelOnly(o) }})
	add(step("ServiceAccount", op, err))
	role, roleErr := c.roles.Roles(ns).Get(AgentRoleName)
	op, err = reconcile(ctx, want[*rbacv1.Role]{kind: "Role", client: rbac.Roles(ns), desired: d.role, cached: role, cacheErr: roleErr,
		fix: func(o *rbacv1.Role) bool {
			changed := labelOnly(o)
			if !rulesEqual(o.Rules, d.role.Rules) {
				o.Rules, changed = d.role.Rules, true
			}
			return changed
		}})
	add(step("Role", op, err))
	rb, rbErr := c.roleBindings.RoleBindings(ns).Get(AgentRoleName)
	op, err = reconcile(ctx, want[*rbacv1.RoleBinding]{kind: "RoleBinding", client: rbac.RoleBindings(ns), desired: d.roleBinding,
		cached: rb, cacheErr: rbErr,
		replace: func(o *rbacv1.RoleBinding) bool { return o.RoleRef != d.roleBinding.RoleRef },
		fix: func(o *rbacv1.RoleBinding) bool {
			changed := labelOnly(o)
			if !equality.Semantic.DeepEqual(o.Subjects, d.roleBinding.Subjects) {
				o.Subjects, changed = d.roleBinding.Subjects, true
			}
			return changed
		}})
	add(step("RoleBinding", op, err))
	cr, crErr := c.clusterRoles.Get(d.clusterRole.Name)
	op, err = reconcile(ctx, want[*rbacv1.ClusterRole]{kind: "ClusterRole", client: rbac.ClusterRoles(), desired: d.clusterRole,
		cached: cr, cacheErr: crErr,
		fix: func(o *rbacv1.ClusterRole) bool {
			changed := owned(o)
			if !rulesEqual(o.Rules, d.clusterRole.Rules) || o.AggregationRule != nil {
				o.Rules, o.AggregationRule, changed = d.clusterRole.Rules, nil, true
			}
			return changed
		}})
	add(step("ClusterRole", op, err))
	crb, crbErr := c.clusterRoleBindings.Get(d.clusterRoleBinding.Name)
	op, err = reconcile(ctx, want[*rbacv1.ClusterRoleBinding]{kind: "ClusterRoleBinding", client: rbac.ClusterRoleBindings(),
		desired: d.clusterRoleBinding, cached: crb, cacheErr: crbErr,
		replace: func(o *rbacv1.ClusterRoleBinding) bool { return o.RoleRef != d.clusterRoleBinding.RoleRef },
		fix: func(o *rbacv1.ClusterRoleBinding) bool {
			changed := owned(o)
			if !equality.Semantic.DeepEqual(o.Subjects, d.clusterRoleBinding.Subjects) {
				o.Subjects, changed = d.clusterRoleBinding.Subjects, true
			}
			return changed
		}})
	add(step("ClusterRoleBinding", op, err))
	add(c.deleteLegacyEventsRBAC(ctx, name, step))

	if repairing && len(done) > 0 {
		msg := fmt.Sprintf("the cluster's objects on the hub were missing or changed by hand; put them back (%s)", strings.Join(done, ", "))
		klog.FromContext(ctx).Info("Repaired cluster objects on the hub", "cluster", name, "writes", done)
		if c.opts.Recorder != nil {
			c.opts.Recorder.Event(cluster, corev1.EventTypeWarning, EventObjectsRepaired, msg)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// deleted is the step of a Delete call: a write if it succeeded, nothing if
// the object was already gone.
func deleted(err error) (string, error) {
	switch {
	case err == nil:
		return "delete", nil
	case apierrors.IsNotFound(err):
		return "", nil
	default:
		return "", err
	}
}

// deleteLegacyEventsRBAC removes the events Role and RoleBinding in
// "default" that older hubs gave the agent.
func (c *Controller) deleteLegacyEventsRBAC(ctx context.Context, cluster string, step func(kind, op string, err error) error) error {
	name := legacyEventsName(cluster)
	var errs []error
	if b, err := c.roleBindings.RoleBindings(metav1.NamespaceDefault).Get(name); err == nil {
		op, err := deleted(c.kube.RbacV1().RoleBindings(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(b.UID))}))
		errs = append(errs, step("RoleBinding", op, err))
	}
	if r, err := c.roles.Roles(metav1.NamespaceDefault).Get(name); err == nil {
		op, err := deleted(c.kube.RbacV1().Roles(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(r.UID))}))
		errs = append(errs, step("Role", op, err))
	}
	return utilerrors.NewAggregate(errs)
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

// AgentClusterRules let the agent read and report its own Cluster only,
// and read the ResourceInterpreterCustomizations (how to judge the health
// of, and what to retain of, the kinds it applies).
func AgentClusterRules(cluster string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{clusterv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"clusters", "clusters/status"},
			ResourceNames: []string{cluster}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{configv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"resourceinterpretercustomizations"},
			Verbs: []string{"get", "list", "watch"}},
	}
}
