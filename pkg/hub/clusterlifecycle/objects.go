package clusterlifecycle

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// object is a typed Kubernetes object (*corev1.Namespace, *rbacv1.Role…).
type object interface {
	metav1.Object
	runtime.Object
}

// typedClient is what a client-go typed client offers for one kind.
type typedClient[T object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// want is one object a Cluster needs on the hub.
type want[T object] struct {
	kind    string
	client  typedClient[T]
	desired T
	// cached is the informer's copy; cacheErr is the lister's error
	// (NotFound: absent, or not labelled and so invisible to the cache).
	cached   T
	cacheErr error
	// fix makes an existing object carry what the hub decides (labels,
	// rules, subjects…) and reports whether it changed anything. It must
	// leave what others own alone: the agent renews the Lease, an admin
	// may annotate the namespace.
	fix func(existing T) bool
	// replace reports that an existing object cannot be fixed in place (a
	// binding's roleRef is immutable): it is deleted and created anew.
	replace func(existing T) bool
}

// reconcile makes w true with as few requests as possible: none when the
// cached copy is already right, one write otherwise. It returns what it
// did ("" when nothing).
func reconcile[T object](ctx context.Context, w want[T]) (string, error) {
	name := w.desired.GetName()
	fail := func(op string, err error) (string, error) {
		return "", fmt.Errorf("%s %s %s: %w", op, w.kind, name, err)
	}
	var existing T
	found := false
	switch {
	case w.cacheErr == nil:
		existing, found = w.cached, true
	case !apierrors.IsNotFound(w.cacheErr):
		return fail("reading", w.cacheErr)
	}
	if found && w.replace != nil && w.replace(existing) {
		if err := w.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(existing.GetUID()))}); err != nil && !apierrors.IsNotFound(err) {
			return fail("replacing", err)
		}
		found = false
	}
	if !found {
		_, err := w.client.Create(ctx, w.desired, metav1.CreateOptions{})
		if err == nil {
			return "create", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fail("creating", err)
		}
		// It exists but the cache does not show it: made by someone else
		// without the cluster label (or the label was removed), or the
		// cache lags behind a create of ours. Read it and adopt it, so the
		// cache sees it from now on.
		if existing, err = w.client.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fail("reading", err)
		}
		if w.replace != nil && w.replace(existing) {
			if err := w.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(existing.GetUID()))}); err != nil && !apierrors.IsNotFound(err) {
				return fail("replacing", err)
			}
			return "delete", fmt.Errorf("replaced %s %s: will create it anew", w.kind, name)
		}
	}
	updated := existing.DeepCopyObject().(T)
	if !w.fix(updated) {
		return "", nil
	}
	if _, err := w.client.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fail("updating", err)
	}
	return "update", nil
}

// fixLabel sets the cluster label, which makes the object visible to the
// hub's label-selected caches (and so watched for deletion).
func fixLabel(obj metav1.Object, cluster string) bool {
	if obj.GetLabels()[LabelCluster] == cluster {
		return false
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelCluster] = cluster
	obj.SetLabels(labels)
	return true
}

// fixOwner makes owner (the Cluster) the object's controller, dropping
// references to an earlier Cluster of the same name.
func fixOwner(obj metav1.Object, owner metav1.OwnerReference) bool {
	refs := obj.GetOwnerReferences()
	if slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == owner.UID }) {
		return false
	}
	refs = slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return r.Kind == owner.Kind && r.APIVersion == owner.APIVersion
	})
	obj.SetOwnerReferences(append(refs, owner))
	return true
}

// desiredObjects are what cluster needs on the hub, in creation order (the
// namespace first). Cluster-scoped objects and the namespace are owned by
// the Cluster, so the garbage collector removes them with it.
type desiredObjects struct {
	namespace          *corev1.Namespace
	lease              *coordinationv1.Lease
	serviceAccount     *corev1.ServiceAccount
	role               *rbacv1.Role
	roleBinding        *rbacv1.RoleBinding
	clusterRole        *rbacv1.ClusterRole
	clusterRoleBinding *rbacv1.ClusterRoleBinding
	owner              metav1.OwnerReference
}

func desiredFor(cluster *clusterv1alpha1.Cluster) desiredObjects {
	ns := Namespace(cluster.Name)
	owner := *metav1.NewControllerRef(cluster, clusterv1alpha1.SchemeGroupVersion.WithKind("Cluster"))
	meta := func(namespace, name string, owned bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelCluster: cluster.Name}}
		if owned {
			m.OwnerReferences = []metav1.OwnerReference{owner}
		}
		return m
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AgentServiceAccount, Namespace: ns}}
	return desiredObjects{
		owner:     owner,
		namespace: &corev1.Namespace{ObjectMeta: meta("", ns, true)},
		// No renewTime and no holder: a Lease the hub makes (or remakes
		// after a deletion) is not a heartbeat; only the agent's renewal is.
		lease: &coordinationv1.Lease{ObjectMeta: meta(ns, cluster.Name, false),
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](DefaultLeaseDurationSeconds)}},
		serviceAccount: &corev1.ServiceAccount{ObjectMeta: meta(ns, AgentServiceAccount, false)},
		role:           &rbacv1.Role{ObjectMeta: meta(ns, AgentRoleName, false), Rules: AgentNamespaceRules(cluster.Name)},
		roleBinding: &rbacv1.RoleBinding{ObjectMeta: meta(ns, AgentRoleName, false), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentRoleName}},
		clusterRole: &rbacv1.ClusterRole{ObjectMeta: meta("", AgentClusterRoleName(cluster.Name), true), Rules: AgentClusterRules(cluster.Name)},
		clusterRoleBinding: &rbacv1.ClusterRoleBinding{ObjectMeta: meta("", AgentClusterRoleName(cluster.Name), true), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentClusterRoleName(cluster.Name)}},
	}
}

// rulesEqual compares rule lists, nil and empty alike.
func rulesEqual(a, b []rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(a, b) }
