package framework

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/flotilla-io/flotilla/pkg/agent/execution"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// WorkAgentOptions configures SimulateWorkAgents.
type WorkAgentOptions struct {
	// NamespacePrefix, if set, restricts the agents to the cluster
	// namespaces whose names start with it (e.g. "flotilla-es-pbench-"), so
	// they do not report for real members that have agents of their own.
	NamespacePrefix string
	// Workers is how many Works are reported at once (16 if zero).
	Workers int
}

// SimulateWorkAgents plays the agent of every cluster (those opts selects)
// until ctx ends, as a real agent reports a Work once its objects have
// rolled out: for each Work generation not yet reported, one status write
// with Applied and Available True for that generation and, for every
// manifest, a ManifestStatus with Health Healthy and, for a workload with
// replicas, the status of a full rollout (all replicas updated, ready and
// available). An unchanged status is never rewritten. It does not release
// the finalizers of deleted Works.
//
// It watches only Works that carry the hub's binding label. Give it a client
// of its own with a QPS high enough for the whole simulated fleet: a real
// fleet has one agent, with its own client and QPS, per cluster; here they
// all share one process and one client.
func SimulateWorkAgents(ctx context.Context, fc flotillaclient.Interface, opts WorkAgentOptions) {
	workers := opts.Workers
	if workers <= 0 {
		workers = 16
	}
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = workobjects.LabelBindingUID
	}))
	informer := factory.Work().V1alpha1().Works().Informer()
	lister := factory.Work().V1alpha1().Works().Lister()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	_, _ = informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			w, ok := obj.(*workv1alpha1.Work)
			return ok && strings.HasPrefix(w.Namespace, opts.NamespacePrefix)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { queue.Add(workobjects.Key(obj.(*workv1alpha1.Work))) },
			UpdateFunc: func(_, obj any) { queue.Add(workobjects.Key(obj.(*workv1alpha1.Work))) },
		},
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	// written remembers, by Work key, the "uid/generation" last reported, so
	// that a lister still showing the Work from before the write (its watch
	// event not yet in) does not cause a second, conflicting write.
	var written sync.Map
	report := func(key string) error {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		w, err := lister.Works(ns).Get(name)
		if err != nil || w.DeletionTimestamp != nil {
			return nil
		}
		done := fmt.Sprintf("%s/%d", w.UID, w.Generation)
		if last, ok := written.Load(key); ok && last == done {
			return nil
		}
		status, ok := RolledOutStatus(w, metav1.Now())
		if !ok {
			return nil
		}
		updated := w.DeepCopy()
		updated.Status = *status
		if _, err := fc.WorkV1alpha1().Works(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
		written.Store(key, done)
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				if err := report(key); err != nil && ctx.Err() == nil {
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

// RolledOutStatus is the status an agent reports for w once every object
// of it is applied and has rolled out, and false when w's current
// generation is already reported Applied or w has nothing to apply.
func RolledOutStatus(w *workv1alpha1.Work, now metav1.Time) (*workv1alpha1.WorkStatus, bool) {
	manifests := w.Spec.Workload.Manifests
	if len(manifests) == 0 {
		return nil, false
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation {
		return nil, false
	}
	status := w.Status.DeepCopy()
	status.ManifestStatuses = make([]workv1alpha1.ManifestStatus, 0, len(manifests))
	for i, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil {
			return nil, false
		}
		if obj.GetNamespace() == "" {
			// As the agent defaults it (namespaced kinds; a simulation
			// cannot tell, and the bench propagates only namespaced ones).
			ns := w.Annotations[workobjects.AnnotationBindingNamespace]
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			obj.SetNamespace(ns)
		}
		gvk := obj.GroupVersionKind()
		status.ManifestStatuses = append(status.ManifestStatuses, workv1alpha1.ManifestStatus{
			Identifier: workv1alpha1.ResourceIdentifier{Ordinal: int32(i), Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
				Namespace: obj.GetNamespace(), Name: obj.GetName()},
			Status: resourceinterpreter.ReflectStatus(rolledOut(obj)),
			Health: workv1alpha1.ResourceHealthy,
		})
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: execution.ReasonAppliedSuccessful, Message: fmt.Sprintf("%d manifests applied", len(manifests)),
		ObservedGeneration: w.Generation, LastTransitionTime: now})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionAvailable, Status: metav1.ConditionTrue,
		Reason: execution.ReasonAvailable, Message: "every applied object is healthy",
		ObservedGeneration: w.Generation, LastTransitionTime: now})
	return status, true
}

// rolledOut is obj as its member shows it once its controller has rolled it
// out: for a workload with spec.replicas, all of them updated, ready and
// available for its first generation; anything else without a status.
func rolledOut(obj *unstructured.Unstructured) *unstructured.Unstructured {
	replicas, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		return obj
	}
	live := obj.DeepCopy()
	live.SetGeneration(1)
	_ = unstructured.SetNestedField(live.Object, map[string]any{"observedGeneration": int64(1), "replicas": replicas,
		"updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}, "status")
	return live
}
