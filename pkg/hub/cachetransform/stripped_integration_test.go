package cachetransform_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The cache keeps bindings without status.schedulingDecision and Works
// with digests for manifests; against a real apiserver, the hub's writes
// from that cache keep the stored decision and never write a digest.
func TestWritesFromCacheWithoutDecisionsAndManifests(t *testing.T) {
	env := testenv.Start(t)
	client := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{"apps", "flotilla-es-m1"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	score := int32(100)
	decision := &workv1alpha1.SchedulingDecision{DecidedTime: metav1.Now(), AffinityName: "primary", OmittedClusters: 3,
		FilteredCounts: []workv1alpha1.FilterCount{{Reason: "TaintUntolerated", Count: 1}}, Clusters: []workv1alpha1.ClusterDecision{
			{ClusterName: "m1", Selected: true, Score: &score, Reason: "Selected"},
			{ClusterName: "m2", Reason: "TaintUntolerated", Message: "taint maintenance=kernel:NoSchedule"},
		}}
	rb := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "apps"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web"}}}
	crb := &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-a-namespace"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "team-a"}}}
	var err error
	if rb, err = client.WorkV1alpha1().ResourceBindings("apps").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb.Status.SchedulingDecision = decision
	if _, err = client.WorkV1alpha1().ResourceBindings("apps").UpdateStatus(ctx, rb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if crb, err = client.WorkV1alpha1().ClusterResourceBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb.Status.SchedulingDecision = decision
	if _, err = client.WorkV1alpha1().ClusterResourceBindings().UpdateStatus(ctx, crb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A manifest as a client may send it: keys out of order, spaces, 2.0.
	const sent = `{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web", "namespace": "apps"}, "spec": {"replicas": 2.0}}`
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "apps-web-deployment", Namespace: "flotilla-es-m1"},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(sent)}}}}}}
	if _, err = client.WorkV1alpha1().Works("flotilla-es-m1").Create(ctx, work, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := flotillainformers.NewSharedInformerFactoryWithOptions(client, 0, flotillainformers.WithTransform(cachetransform.Compact))
	rbs, crbs, works := factory.Work().V1alpha1().ResourceBindings(), factory.Work().V1alpha1().ClusterResourceBindings(), factory.Work().V1alpha1().Works()
	bindings := &workobjects.Bindings{Client: client, Namespaced: rbs.Lister(), ClusterScoped: crbs.Lister()}
	rbs.Informer()
	crbs.Informer()
	works.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	for _, key := range []string{"apps/web-deployment", "team-a-namespace"} {
		var cached *workv1alpha1.ResourceBinding
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			cached, _ = bindings.Get(key)
			return cached != nil && cached.Status.SchedulingDecision == nil && cached.Generation > 0, nil
		}); err != nil {
			t.Fatalf("%s: not cached without its decision: %+v", key, cached)
		}
		// A spec write from the cache (the scheduler's), then a status
		// patch from that stale copy: a conflict, as an Update would get.
		spec := cached.DeepCopy()
		spec.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "m1"}}
		afterSpec, err := bindings.Update(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		stale := cached.DeepCopy()
		meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: "Success"})
		if _, err := bindings.PatchStatus(ctx, cached, stale); !apierrors.IsConflict(err) {
			t.Errorf("%s: status patch from a stale copy: %v, want a conflict", key, err)
		}
		// From the current copy (its decision dropped as the cache drops
		// it): the condition is written and the decision kept.
		base := afterSpec.DeepCopy()
		base.Status.SchedulingDecision = nil
		updated := base.DeepCopy()
		meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: "Success"})
		updated.Status.SchedulerObservedGeneration = base.Generation
		out, err := bindings.PatchStatus(ctx, base, updated)
		if err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(out.Status.Conditions, workv1alpha1.BindingConditionScheduled) || out.Status.SchedulerObservedGeneration != base.Generation {
			t.Errorf("%s: patched status %+v, want Scheduled and the observed generation", key, out.Status)
		}
		if d := out.Status.SchedulingDecision; d == nil || len(d.Clusters) != 2 || d.Clusters[1].Message != decision.Clusters[1].Message {
			t.Errorf("%s: decision after a status patch from the cache = %+v, want it kept", key, d)
		}
		if len(out.Spec.Clusters) != 1 {
			t.Errorf("%s: spec after a status patch = %+v", key, out.Spec)
		}
		// Removing a field removes it; equal statuses write nothing.
		removed := out.DeepCopy()
		removed.Status.Conditions = nil
		if out, err = bindings.PatchStatus(ctx, out, removed); err != nil || len(out.Status.Conditions) != 0 || out.Status.SchedulingDecision == nil {
			t.Errorf("%s: after removing the conditions: %+v, %v", key, out.Status, err)
		}
		same, err := bindings.PatchStatus(ctx, out, out.DeepCopy())
		if err != nil || same != out {
			t.Errorf("%s: a patch of equal statuses wrote (%v)", key, err)
		}
		// A new decision replaces the stored one whole.
		newer := out.DeepCopy()
		newer.Status.SchedulingDecision = &workv1alpha1.SchedulingDecision{DecidedTime: metav1.Now(), Clusters: []workv1alpha1.ClusterDecision{{ClusterName: "m3", Selected: true, Reason: "Selected"}}}
		base = out.DeepCopy()
		base.Status.SchedulingDecision = nil
		if out, err = bindings.PatchStatus(ctx, base, newer); err != nil {
			t.Fatal(err)
		}
		// Whole: none of the old decision's fields the new one leaves
		// empty survive (a merge patch would merge the two objects).
		if d := out.Status.SchedulingDecision; d == nil || len(d.Clusters) != 1 || d.Clusters[0].ClusterName != "m3" ||
			d.AffinityName != "" || d.FilteredCounts != nil || d.OmittedClusters != 0 {
			t.Errorf("%s: decision after a new one = %+v, want only the new one", key, d)
		}
	}

	var cachedWork *workv1alpha1.Work
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		cachedWork, _ = works.Lister().Works("flotilla-es-m1").Get("apps-web-deployment")
		return cachedWork != nil, nil
	}); err != nil {
		t.Fatal("Work not cached")
	}
	got := cachedWork.Spec.Workload.Manifests[0].Raw
	if !cachetransform.IsDigest(got) {
		t.Fatalf("cached manifest = %s, want a digest", got)
	}
	rendered := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"apps"},"spec":{"replicas":2}}`)
	if !cachetransform.SameManifest(got, rendered) {
		t.Errorf("the stored manifest's digest %s does not match the same manifest rendered %s", got, rendered)
	}
	if cachetransform.SameManifest(got, []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"apps"},"spec":{"replicas":3}}`)) {
		t.Error("a changed manifest matches the stored one's digest")
	}
	// The cached Work cannot be written back as it is.
	if _, err := json.Marshal(cachedWork); err == nil {
		t.Error("a cached Work with a digest for its manifest encodes")
	}
	if _, err := client.WorkV1alpha1().Works("flotilla-es-m1").Update(ctx, cachedWork.DeepCopy(), metav1.UpdateOptions{}); err == nil {
		t.Error("a cached Work with a digest for its manifest was written")
	}
	stored, err := client.WorkV1alpha1().Works("flotilla-es-m1").Get(ctx, "apps-web-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !cachetransform.SameManifest(stored.Spec.Workload.Manifests[0].Raw, rendered) || cachetransform.IsDigest(stored.Spec.Workload.Manifests[0].Raw) {
		t.Errorf("stored manifest = %s", stored.Spec.Workload.Manifests[0].Raw)
	}
}
