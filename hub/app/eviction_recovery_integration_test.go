package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	erBinding  = "nginx-deployment"
	erTaintKey = "example.com/eviction-recovery"
)

// erStartHub starts the hub with clusters that stay Ready without a Lease
// for the length of the test: only the test's taint moves workloads.
func erStartHub(t *testing.T, clusters ...string) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, clusters...)
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

// erWaitEvent waits for an event on the binding.
func erWaitEvent(t *testing.T, kube kubernetes.Interface, reason, msg string) {
	t.Helper()
	waitUntil(t, "event "+reason+" on the binding", func() (bool, error) {
		events, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": erBinding, "reason": reason}.String()})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "ResourceBinding" && strings.Contains(e.Message, msg) {
				return true, nil
			}
		}
		return false, nil
	})
}

// erPropagate creates the nginx template and a policy placing it on
// clusters with Divided replicas.
func erPropagate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, manifest, kind, name string, clusters ...string) {
	t.Helper()
	group := "apps/v1"
	if kind == "Job" {
		group = "batch/v1"
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: group, Kind: kind, Name: name}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
				},
			},
		}}
	if len(clusters) > 1 {
		// Weights 1, 3, ...: uneven shares.
		rs := policy.Spec.Placement.ReplicaScheduling
		rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
		rs.WeightPreference = &policyv1alpha1.ClusterPreferences{}
		for i, c := range clusters {
			rs.WeightPreference.StaticWeightList = append(rs.WeightPreference.StaticWeightList, policyv1alpha1.StaticClusterWeight{
				TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: int64(1 + 2*i)})
		}
	}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", name, manifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// erTaint adds (or removes) a NoExecute taint nothing tolerates.
func erTaint(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, add bool) {
	t.Helper()
	waitUntil(t, "taint on "+cluster+" changed", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, tn := range c.Spec.Taints {
			if tn.Key != erTaintKey {
				taints = append(taints, tn)
			}
		}
		if add {
			taints = append(taints, corev1.Taint{Key: erTaintKey, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		}
		c.Spec.Taints = taints
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// erSetImage changes the template's container image.
func erSetImage(t *testing.T, ctx context.Context, fc flotillaclient.Interface, image string) {
	t.Helper()
	waitUntil(t, "template image set to "+image, func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl.Spec.Manifest.Raw = []byte(strings.Replace(string(tmpl.Spec.Manifest.Raw), `"image":"`+imageOfRaw(t, tmpl.Spec.Manifest.Raw)+`"`, `"image":"`+image+`"`, 1))
		_, err = fc.WorkV1alpha1().ResourceTemplates("default").Update(ctx, tmpl, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func imageOfRaw(t *testing.T, raw []byte) string {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return imageOf(obj)
}

func erBindingOf(t *testing.T, ctx context.Context, fc flotillaclient.Interface) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, erBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// erPinnedAndEvicted is the seed of Karmada #5782: nginx pinned to member1
// (3 replicas, applied), then member1 tainted NoExecute: the taint manager
// moves it into a graceful eviction task, and the scheduler finds nowhere
// else to put it.
func erPinnedAndEvicted(t *testing.T) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	ctx, fc, kube := erStartHub(t, "member1", "member2")
	erPropagate(t, ctx, fc, nginxManifest, "Deployment", "nginx", "member1")
	waitReplicas(t, fc, "default", erBinding, map[string]int32{"member1": 3})
	reportApplied(t, fc, waitWork(t, fc, "member1", "default", erBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 3 }), 3)

	erTaint(t, ctx, fc, "member1", true)
	waitUntil(t, "member1 evicted into a task and the scheduler found nowhere else", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		return len(rb.Spec.Clusters) == 0 && len(rb.Spec.GracefulEvictionTasks) == 1 &&
			rb.Status.SchedulerObservedGeneration == rb.Generation &&
			meta.IsStatusConditionFalse(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled), nil
	})
	return ctx, fc, kube
}

// Karmada #5782/#5803: an eviction nothing replaced is cancelled once its
// cluster is fit again: the task and its history go, the cluster is back
// with its replicas, and template changes reach its Work again.
func TestEvictionNothingReplacedIsCancelledWhenClusterReturns(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := erPinnedAndEvicted(t)
	work := "flotilla-es-member1"
	if _, err := fc.WorkV1alpha1().Works(work).Get(ctx, workobjects.WorkName("default", erBinding), metav1.GetOptions{}); err != nil {
		t.Fatalf("member1's Work (the only copy) went during the eviction: %v", err)
	}

	erTaint(t, ctx, fc, "member1", false)
	waitUntil(t, "the eviction cancelled: no task, member1 back with 3", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		return len(rb.Spec.GracefulEvictionTasks) == 0 && len(rb.Spec.Clusters) == 1 &&
			rb.Spec.Clusters[0] == workv1alpha1.TargetCluster{Name: "member1", Replicas: 3}, nil
	})
	erWaitEvent(t, kube, "EvictionCancelled", "member1")
	rb := erBindingOf(t, ctx, fc)
	for _, h := range rb.Spec.EvictionHistory {
		if h.ClusterName == "member1" {
			t.Errorf("the cancelled eviction is still in the history: %+v", rb.Spec.EvictionHistory)
		}
	}
	waitUntil(t, "Scheduled True again", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		return meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled) && len(rb.Spec.Clusters) == 1, nil
	})

	erSetImage(t, ctx, fc, "nginx:1.28")
	waitWork(t, fc, "member1", "default", erBinding, func(o *unstructured.Unstructured) bool {
		return imageOf(o) == "nginx:1.28" && replicasOf(o) == 3
	})
	waitUntil(t, "WorksUpToDate True", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		return meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionWorksUpToDate), nil
	})
}

// While the evicting copy is the only one, a template change cannot reach
// it; the binding (and its template) say so, naming the cluster.
func TestStaleEvictingCopyIsReported(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := erPinnedAndEvicted(t)
	erSetImage(t, ctx, fc, "nginx:1.28")
	var cond *metav1.Condition
	waitUntil(t, "WorksUpToDate False naming member1 on the binding", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		cond = meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionWorksUpToDate)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "StaleCopies" &&
			strings.Contains(cond.Message, "member1"), nil
	})
	t.Logf("binding: %s %s: %s", cond.Type, cond.Reason, cond.Message)
	waitUntil(t, "the template mirrors it", func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tmpl.Status.Conditions, workv1alpha1.BindingConditionWorksUpToDate)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "member1"), nil
	})
	// The evicting copy itself is left as it was.
	w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName("default", erBinding), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := imageOf(manifestOf(t, w)); img != "nginx:1.27" {
		t.Errorf("the evicting copy was changed to %s", img)
	}
}

// The normal path is unchanged: an eviction whose replacement took all
// replicas is not cancelled when the cluster returns; it ends when the
// replacement is healthy and the old copy goes.
func TestEvictionReplacedIsNotCancelled(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := erStartHub(t, "member1", "member2")
	erPropagate(t, ctx, fc, nginxManifest, "Deployment", "nginx", "member1", "member2")
	waitUntil(t, "scheduled on both", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, erBinding, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && len(rb.Spec.Clusters) == 2, err
	})
	for _, tc := range erBindingOf(t, ctx, fc).Spec.Clusters {
		n := tc.Replicas
		reportApplied(t, fc, waitWork(t, fc, tc.Name, "default", erBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == int64(n) }), int(n))
	}
	erTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", erBinding, map[string]int32{"member2": 3})
	work2 := waitWork(t, fc, "member2", "default", erBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 3 })
	waitUntil(t, "the scheduler saw the eviction", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		return rb.Status.SchedulerObservedGeneration == rb.Generation, nil
	})

	// member1 returns before member2 reported its new copy: the task stays.
	erTaint(t, ctx, fc, "member1", false)
	for range 30 {
		rb := erBindingOf(t, ctx, fc)
		if len(rb.Spec.GracefulEvictionTasks) != 1 || len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != "member2" {
			t.Fatalf("the replaced eviction was undone: clusters %+v, tasks %+v", rb.Spec.Clusters, rb.Spec.GracefulEvictionTasks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	reportApplied(t, fc, work2, 3)
	waitUntil(t, "the task ended the normal way and member1's Work went", func() (bool, error) {
		rb := erBindingOf(t, ctx, fc)
		if len(rb.Spec.GracefulEvictionTasks) != 0 {
			return false, nil
		}
		if len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != "member2" {
			t.Fatalf("after the task: clusters %+v", rb.Spec.Clusters)
		}
		w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName("default", erBinding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if w.DeletionTimestamp != nil { // play member1's agent
			w.Finalizers = nil
			_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
		}
		return false, nil
	})
}

const erJobManifest = `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pi"},
"spec":{"parallelism":4,"completions":10,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"pi","image":"perl:5.34"}]}}}}`

// A Divided Job's Works share its completions, summing to the template's.
func TestDividedJobSharesCompletions(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := erStartHub(t, "member1", "member2")
	erPropagate(t, ctx, fc, erJobManifest, "Job", "pi", "member1", "member2")
	const binding = "pi-job"
	waitUntil(t, "the Job divided over both clusters", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && len(rb.Spec.Clusters) == 2, err
	})
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parallelism, completions int64
	for _, tc := range rb.Spec.Clusters {
		w := waitWork(t, fc, tc.Name, "default", binding, func(o *unstructured.Unstructured) bool {
			p, _, _ := unstructured.NestedInt64(o.Object, "spec", "parallelism")
			return p == int64(tc.Replicas)
		})
		obj := manifestOf(t, w)
		p, _, _ := unstructured.NestedInt64(obj.Object, "spec", "parallelism")
		c, found, _ := unstructured.NestedInt64(obj.Object, "spec", "completions")
		if !found || c <= 0 {
			t.Errorf("cluster %s (parallelism %d): completions %d", tc.Name, p, c)
		}
		parallelism += p
		completions += c
	}
	if parallelism != 4 || completions != 10 {
		t.Errorf("the Works run parallelism %d and completions %d in all, want 4 and 10", parallelism, completions)
	}
}
