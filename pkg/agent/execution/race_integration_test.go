package execution

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// These tests race another writer against the controller deterministically:
// the hook runs between the controller's decision (made on its caches) and
// its write, on a real apiserver that plays both hub and member.

const hubNamespace = "flotilla-es-m1"

type raceEnv struct {
	env  *testenv.Env
	hub  flotillaclient.Interface
	c    *Controller
	mu   sync.Mutex
	hook func(op string, obj *unstructured.Unstructured)
}

func startController(t *testing.T) *raceEnv {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	hub, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(hub, 0, flotillainformers.WithNamespace(hubNamespace))
	works := factory.Work().V1alpha1().Works().Informer()
	r := &raceEnv{env: env, hub: hub}
	r.c = NewController(hub, works, dyn, md, env.Kube, env.Kube.Discovery(), Options{Namespace: hubNamespace, OrphanGracePeriod: time.Hour,
		Metrics: agentmetrics.New(prometheus.NewRegistry())})
	r.c.beforeWriteHook = func(op string, obj *unstructured.Unstructured) {
		r.mu.Lock()
		hook := r.hook
		r.mu.Unlock()
		if hook != nil {
			hook(op, obj)
		}
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); r.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return r
}

// onceOn sets a hook that runs fn the first time the controller is about to
// do op on the object named name.
func (r *raceEnv) onceOn(op, name string, fn func()) {
	var once sync.Once
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = func(o string, obj *unstructured.Unstructured) {
		if o == op && obj.GetName() == name {
			once.Do(fn)
		}
	}
}

func (r *raceEnv) createWork(t *testing.T, name string, mutate func(*workv1alpha1.Work), objs ...map[string]any) {
	t.Helper()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace, Finalizers: []string{workv1alpha1.ExecutionFinalizer}}}
	w.Spec.Workload.Manifests = manifests(t, objs...)
	if mutate != nil {
		mutate(w)
	}
	if _, err := r.hub.WorkV1alpha1().Works(hubNamespace).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *raceEnv) setManifests(t *testing.T, name string, objs ...map[string]any) {
	t.Helper()
	w, err := r.hub.WorkV1alpha1().Works(hubNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Spec.Workload.Manifests = manifests(t, objs...)
	if _, err := r.hub.WorkV1alpha1().Works(hubNamespace).Update(context.Background(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func manifests(t *testing.T, objs ...map[string]any) []workv1alpha1.Manifest {
	t.Helper()
	var out []workv1alpha1.Manifest
	for _, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return out
}

func cm(name, value string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
		"data": map[string]any{"owner": value}}
}

// applied waits for the Work's Applied condition of the Work's current
// generation to satisfy ok.
func (r *raceEnv) waitApplied(t *testing.T, name, what string, ok func(*metav1.Condition) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := r.hub.WorkV1alpha1().Works(hubNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
		return c != nil && c.ObservedGeneration == w.Generation && ok(c), nil
	})
	if err != nil {
		t.Fatalf("Work %s: timed out waiting for %s", name, what)
	}
}

func (r *raceEnv) configMap(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	got, err := r.env.Kube.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (r *raceEnv) createTheirs(t *testing.T, name string) {
	t.Helper()
	_, err := r.env.Kube.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"owner": "someone"}}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("creating the racing object: %v", err)
	}
}

func (r *raceEnv) replaceWithTheirs(t *testing.T, name string) {
	t.Helper()
	if err := r.env.Kube.CoreV1().ConfigMaps("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting: %v", err)
	}
	r.createTheirs(t, name)
}

func isTheirs(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Data["owner"] == "someone" && cm.Labels[workv1alpha1.LabelManaged] == "" && len(cm.Annotations) == 0
}

// An object someone else creates after the cache said "absent" is not
// adopted: the Create fails, the live object goes through the conflict
// handling (Conflict), and it stays exactly as they made it. With
// Overwrite it is adopted, but not marked as created by Flotilla.
func TestCreateDoesNotAdoptAnObjectCreatedMeanwhile(t *testing.T) {
	r := startController(t)
	r.onceOn("create", "contested", func() { r.createTheirs(t, "contested") })
	r.createWork(t, "abort", nil, cm("contested", "flotilla"))
	r.waitApplied(t, "abort", "Conflict", func(c *metav1.Condition) bool {
		return c.Reason == ReasonConflict && strings.Contains(c.Message, "not managed by Flotilla")
	})
	if got := r.configMap(t, "contested"); !isTheirs(got) {
		t.Fatalf("the object created meanwhile was taken: %+v", got)
	}

	r.onceOn("create", "contested-2", func() { r.createTheirs(t, "contested-2") })
	r.createWork(t, "overwrite", func(w *workv1alpha1.Work) { w.Spec.ConflictResolution = policyv1alpha1.ConflictOverwrite }, cm("contested-2", "flotilla"))
	r.waitApplied(t, "overwrite", "Applied", func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	got := r.configMap(t, "contested-2")
	if got.Data["owner"] != "flotilla" || got.Labels[workv1alpha1.LabelManaged] != "true" || got.Annotations[AnnotationCreatedByFlotilla] != "" {
		t.Fatalf("adopted object = %v %v %v, want it managed but not marked created", got.Data, got.Labels, got.Annotations)
	}
	// Deleting the Work therefore releases it.
	if err := r.hub.WorkV1alpha1().Works(hubNamespace).Delete(context.Background(), "overwrite", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := r.hub.WorkV1alpha1().Works(hubNamespace).Get(ctx, "overwrite", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the Work was not released")
	}
	if got := r.configMap(t, "contested-2"); got == nil || got.Labels[workv1alpha1.LabelManaged] != "" {
		t.Fatalf("the adopted object was deleted or not released: %+v", got)
	}
}

// An object of ours deleted and re-created by someone else between the
// controller's read and its write is not adopted: the write carries the UID
// it was decided on (on the managed-fields upgrade through its
// resourceVersion, on the server-side apply through metadata.uid).
func TestWriteCarriesTheUIDItWasDecidedOn(t *testing.T) {
	for _, op := range []string{"upgrade-managed-fields", "apply"} {
		t.Run(op, func(t *testing.T) {
			r := startController(t)
			r.createWork(t, "mine", nil, cm("replaced", "flotilla-1"))
			r.waitApplied(t, "mine", "Applied", func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
			if got := r.configMap(t, "replaced"); got == nil || got.Annotations[AnnotationCreatedByFlotilla] != "true" {
				t.Fatalf("not created by the Work: %+v", got)
			}
			r.onceOn(op, "replaced", func() { r.replaceWithTheirs(t, "replaced") })
			r.setManifests(t, "mine", cm("replaced", "flotilla-2"))
			r.waitApplied(t, "mine", "Conflict with the re-created object", func(c *metav1.Condition) bool {
				return c.Reason == ReasonConflict && strings.Contains(c.Message, "not managed by Flotilla")
			})
			if got := r.configMap(t, "replaced"); !isTheirs(got) {
				t.Fatalf("the re-created object was taken: %+v", got)
			}
		})
	}
}

// A dropped object that someone re-created under the same name between the
// controller's read and its delete is not deleted: the delete carries the
// UID and resourceVersion it was decided on.
func TestDropDeletesOnlyTheObjectItDecidedOn(t *testing.T) {
	r := startController(t)
	r.createWork(t, "shrinks", nil, cm("dropped", "flotilla"), cm("kept", "flotilla"))
	r.waitApplied(t, "shrinks", "Applied", func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	// Each sync of the Work counts one Unchanged manifest ("kept").
	syncs := func() float64 {
		var m dto.Metric
		if err := r.c.opts.Metrics.WorkApplies.WithLabelValues(OutcomeUnchanged).Write(&m); err != nil {
			t.Error(err)
		}
		return m.GetCounter().GetValue()
	}
	fired := make(chan float64, 1)
	r.onceOn("delete", "dropped", func() { r.replaceWithTheirs(t, "dropped"); fired <- syncs() })
	r.setManifests(t, "shrinks", cm("kept", "flotilla"))
	var atHook float64
	select {
	case atHook = <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("the dropped object was never deleted")
	}
	// The failed delete makes the Work sync again; that sync finds the new
	// object unmanaged and leaves it.
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if got := r.configMap(t, "dropped"); !isTheirs(got) {
			t.Fatalf("the re-created object was deleted or changed: %+v", got)
		}
		return syncs() >= atHook+1 && r.c.queue.NumRequeues("shrinks") == 0, nil
	})
	if err != nil {
		t.Fatalf("the Work never synced again after the failed delete (syncs %v, at the hook %v, requeues %d)", syncs(), atHook, r.c.queue.NumRequeues("shrinks"))
	}
	if got := r.configMap(t, "dropped"); !isTheirs(got) {
		t.Fatalf("the re-created object was deleted or changed: %+v", got)
	}
	r.waitApplied(t, "shrinks", "Applied", func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
}
