package clusterlifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// DefaultWorkReleaseTimeout is how long a deleted Ready cluster's agent
// has to release its Works (delete their objects on the member and remove
// the finalizers) before the hub removes the finalizers itself.
const DefaultWorkReleaseTimeout = 5 * time.Minute

// teardownPoll is how often a cluster being removed is looked at while its
// agent releases Works or its namespace is emptied: Work deletions and
// Cluster status changes do not wake this controller.
const teardownPoll = 2 * time.Second

// Event reasons of a cluster's removal.
const (
	// EventWorksAbandoned: the hub removed the execution finalizers of
	// Works the agent did not release; their member objects stay.
	EventWorksAbandoned = "WorksAbandoned"
)

// teardownState is what the removal of a cluster looks at.
type teardownState struct {
	// Ready: the Cluster's Ready condition is True (its agent is alive and
	// can release Works).
	Ready bool
	// Elapsed since the Cluster's deletion was requested (its
	// deletionTimestamp, the hub's apiserver's clock); Timeout bounds the
	// wait for the agent.
	Elapsed, Timeout time.Duration
	// Works left in the cluster namespace; Held of them carry the
	// execution finalizer; Undeleted have no deletionTimestamp yet.
	Works, Held, Undeleted int
	// The cluster namespace exists; Terminating: its deletion started.
	NamespaceExists, NamespaceTerminating bool
}

// teardownStep is what to do next.
type teardownStep struct {
	// DeleteWorks: delete the Works not yet being deleted, so the agent
	// releases them.
	DeleteWorks bool
	// Abandon: remove the Works' execution finalizers (the agent cannot or
	// did not release them); AbandonReason says why.
	Abandon       bool
	AbandonReason string
	// DeleteNamespace: every Work is gone; the namespace (Lease, agent
	// ServiceAccount and Role) may go.
	DeleteNamespace bool
	// Finish: the namespace is gone: revoke what is left of the identity
	// (its ClusterRoleBinding) and remove the Cluster's finalizer.
	Finish bool
	// RequeueAfter: look again then (0: no need).
	RequeueAfter time.Duration
}

// planTeardown decides the next step of removing a cluster. The order is
// what makes removal complete whatever the agent does: Works first (the
// live agent deletes their member objects and removes their finalizers,
// which needs its identity), then the namespace, and the identity last.
// An agent that cannot release (the cluster is not Ready) or does not
// within the timeout gets its Works' finalizers removed: their member
// objects are left as they are.
func planTeardown(s teardownState) teardownStep {
	if s.Works > 0 {
		step := teardownStep{DeleteWorks: s.Undeleted > 0, RequeueAfter: teardownPoll}
		switch {
		case s.Held == 0:
			// Deleted without finalizers: they go at once.
		case !s.Ready:
			step.Abandon, step.AbandonReason = true, "the cluster is not Ready, so its agent cannot release them"
		case s.Elapsed >= s.Timeout:
			step.Abandon, step.AbandonReason = true, fmt.Sprintf("its agent did not release them within %s", s.Timeout)
		default:
			step.RequeueAfter = min(teardownPoll, s.Timeout-s.Elapsed)
		}
		return step
	}
	switch {
	case !s.NamespaceExists:
		return teardownStep{Finish: true}
	case !s.NamespaceTerminating:
		return teardownStep{DeleteNamespace: true, RequeueAfter: teardownPoll}
	default:
		// The namespace controller empties it; its deletion event
		// requeues the cluster, the poll is a backstop.
		return teardownStep{RequeueAfter: teardownPoll}
	}
}

// teardown removes a deleted Cluster's Works, then its namespace, then its
// identity, and then its finalizer (planTeardown).
func (c *Controller) teardown(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	if !slices.Contains(cluster.Finalizers, Finalizer) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("cluster", cluster.Name)
	ns := Namespace(cluster.Name)
	works, err := c.flotilla.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	s := teardownState{
		Ready:   meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady),
		Elapsed: time.Since(cluster.DeletionTimestamp.Time), Timeout: c.opts.WorkReleaseTimeout,
		Works: len(works.Items),
	}
	for i := range works.Items {
		if slices.Contains(works.Items[i].Finalizers, workv1alpha1.ExecutionFinalizer) {
			s.Held++
		}
		if works.Items[i].DeletionTimestamp == nil {
			s.Undeleted++
		}
	}
	// Read the namespace from the apiserver: the cache may not show its
	// deletion yet, and deleting twice is harmless but not free.
	existing, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		s.NamespaceExists, s.NamespaceTerminating = true, existing.DeletionTimestamp != nil
	case !apierrors.IsNotFound(err):
		return err
	}
	step := planTeardown(s)
	logger.V(2).Info("Removing cluster", "state", s, "step", step)

	var errs []error
	if step.DeleteWorks {
		for i := range works.Items {
			w := &works.Items[i]
			if w.DeletionTimestamp != nil {
				continue
			}
			err := c.flotilla.WorkV1alpha1().Works(ns).Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(w.UID))})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, err)
			}
		}
	}
	if step.Abandon {
		released, err := c.abandonWorks(ctx, ns, works.Items)
		errs = append(errs, err)
		if released > 0 {
			logger.Info("Released a removed cluster's Works without its agent; their member objects are left as they are",
				"works", released, "reason", step.AbandonReason)
			c.event(cluster, corev1.EventTypeWarning, EventWorksAbandoned,
				"released %d Works without their agent (%s); objects on the member are left as they are", released, step.AbandonReason)
		}
	}
	if step.DeleteNamespace {
		err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(existing.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		return err
	}
	if step.Finish {
		return c.finishTeardown(ctx, cluster)
	}
	if step.RequeueAfter > 0 {
		c.queue.AddAfter(cluster.Name, step.RequeueAfter)
	}
	return nil
}

// finishTeardown revokes the last of the agent identity (its ServiceAccount
// went with the namespace; the ClusterRoleBinding is deleted here, the
// ClusterRole, which grants nothing unbound, goes with the Cluster through
// the garbage collector) and removes the Cluster's finalizer.
func (c *Controller) finishTeardown(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	name := AgentClusterRoleName(cluster.Name)
	if crb, err := c.kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err == nil {
		if !metav1.IsControlledBy(crb, cluster) && len(crb.OwnerReferences) > 0 {
			// A binding of a later Cluster of the same name cannot exist
			// while this one holds the name; anything else is not ours.
			klog.FromContext(ctx).Info("Leaving a ClusterRoleBinding another owner controls", "clusterRoleBinding", name)
		} else if err := c.kube.RbacV1().ClusterRoleBindings().Delete(ctx, name,
			metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(crb.UID))}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	updated := cluster.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == Finalizer })
	_, err := c.flotilla.ClusterV1alpha1().Clusters().Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).Info("Removed cluster: its Works, namespace and agent identity are gone", "cluster", cluster.Name)
	}
	return err
}

// abandonWorks removes the execution finalizer from works and returns how
// many it released.
func (c *Controller) abandonWorks(ctx context.Context, ns string, works []workv1alpha1.Work) (int, error) {
	released := 0
	var errs []error
	for i := range works {
		w := works[i].DeepCopy()
		if !slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer) {
			continue
		}
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
		_, err := c.flotilla.WorkV1alpha1().Works(ns).Update(ctx, w, metav1.UpdateOptions{})
		switch {
		case err == nil:
			released++
		case !apierrors.IsNotFound(err):
			errs = append(errs, err) // a conflict: the agent released it meanwhile, or retry
		}
	}
	return released, utilerrors.NewAggregate(errs)
}

// releaseStuckWorks handles a cluster namespace that is Terminating while
// its Cluster lives (deleted by hand, or left by an older hub's removal):
// the namespace controller deletes the agent's ServiceAccount and Role
// along with the Works, so the agent may no longer be able to release
// them. Works deleted longer than the timeout ago lose their finalizer, so
// the namespace goes and the hub can make it (and the identity) again.
func (c *Controller) releaseStuckWorks(ctx context.Context, cluster *clusterv1alpha1.Cluster) error {
	ns := Namespace(cluster.Name)
	works, err := c.flotilla.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var stuck []workv1alpha1.Work
	for _, w := range works.Items {
		if w.DeletionTimestamp != nil && time.Since(w.DeletionTimestamp.Time) >= c.opts.WorkReleaseTimeout {
			stuck = append(stuck, w)
		}
	}
	released, err := c.abandonWorks(ctx, ns, stuck)
	if released > 0 {
		c.event(cluster, corev1.EventTypeWarning, EventWorksAbandoned,
			"namespace %s is being deleted and its agent did not release %d Works within %s; released them, objects on the member are left as they are",
			ns, released, c.opts.WorkReleaseTimeout)
	}
	return err
}

func (c *Controller) event(cluster *clusterv1alpha1.Cluster, eventType, reason, format string, args ...any) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(cluster, eventType, reason, format, args...)
	}
}
