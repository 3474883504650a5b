package framework

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// statusWrites counts the requests that write a status subresource.
type statusWrites struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (s *statusWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && strings.HasSuffix(r.URL.Path, "/status") {
		s.n.Add(1)
	}
	return s.next.RoundTrip(r)
}

// The simulated agents report a Work of their clusters once per generation
// (a metadata change is no new generation), and leave alone Works of other
// clusters and Works without the hub's binding label.
func TestSimulateWorkAgents(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	deployment := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app"},"spec":{"replicas":%d}}`
	work := func(ns, name string, labelled bool) *workv1alpha1.Work {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{workobjects.AnnotationBindingNamespace: "apps"}}}
		if labelled {
			w.Labels = map[string]string{workobjects.LabelBindingUID: "uid-1"}
		}
		w.Spec.Workload.Manifests = []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(strings.Replace(deployment, "%d", "4", 1))}}}
		return w
	}
	for _, ns := range []string{"flotilla-es-pbench-000", "flotilla-es-member1"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []*workv1alpha1.Work{
		work("flotilla-es-member1", "real", true),
		work("flotilla-es-pbench-000", "unlabelled", false),
		work("flotilla-es-pbench-000", "simulated", true),
	} {
		if _, err := fc.WorkV1alpha1().Works(w.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	counter := &statusWrites{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	// One worker: Works are reported in the order their events came, so
	// once the last one is reported, every earlier one has been handled.
	go SimulateWorkAgents(ctx, flotillaclient.NewForConfigOrDie(cfg), WorkAgentOptions{NamespacePrefix: "flotilla-es-pbench-", Workers: 1})

	appliedFor := func(generation int64) *workv1alpha1.Work {
		t.Helper()
		var w *workv1alpha1.Work
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			w, err = fc.WorkV1alpha1().Works("flotilla-es-pbench-000").Get(ctx, "simulated", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation, nil
		}); err != nil {
			t.Fatalf("the Work's generation %d not reported Applied: %v", generation, err)
		}
		return w
	}
	w := appliedFor(1)
	if len(w.Status.ManifestStatuses) != 1 || w.Status.ManifestStatuses[0].Health != workv1alpha1.ResourceHealthy {
		t.Errorf("manifest statuses = %+v, want one Healthy", w.Status.ManifestStatuses)
	}

	// A metadata change: same generation, nothing to report.
	w.Annotations["touched"] = "yes"
	if _, err := fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A spec change: a new generation, reported once.
	w, err := fc.WorkV1alpha1().Works(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Spec.Workload.Manifests[0].Raw = []byte(strings.Replace(deployment, "%d", "6", 1))
	if _, err := fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	appliedFor(2)
	if got := counter.n.Load(); got != 2 {
		t.Errorf("%d status writes, want 2 (one per generation of the one Work the agents are for)", got)
	}
	for _, name := range []string{"flotilla-es-member1/real", "flotilla-es-pbench-000/unlabelled"} {
		ns, n, _ := strings.Cut(name, "/")
		other, err := fc.WorkV1alpha1().Works(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(other.Status.Conditions) > 0 {
			t.Errorf("%s was reported: %+v", name, other.Status.Conditions)
		}
	}
}
