package cachetransform

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

func managed() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
}

func TestStrip(t *testing.T) {
	meta := func(annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: managed(), Annotations: annotations}
	}
	lastApplied := func(extra map[string]string) map[string]string {
		a := map[string]string{AnnotationLastApplied: `{"apiVersion":"work.flotilla.io/v1alpha1"}`}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, tc := range []struct {
		name string
		in   runtime.Object
		// wantAnnotations are the annotations left; managedFields are
		// always dropped.
		wantAnnotations map[string]string
	}{
		{"template: last-applied dropped, the map too",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(lastApplied(nil))}, nil},
		{"template: other annotations kept",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(lastApplied(map[string]string{"team": "a"}))}, map[string]string{"team": "a"}},
		{"cluster template: last-applied dropped",
			&workv1alpha1.ClusterResourceTemplate{ObjectMeta: meta(lastApplied(nil))}, nil},
		{"template without annotations",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(nil)}, nil},
		// The hub Updates bindings and Works from the cache: erasing an
		// annotation there would erase it on the server.
		{"binding: annotations kept",
			&workv1alpha1.ResourceBinding{ObjectMeta: meta(lastApplied(nil))}, lastApplied(nil)},
		{"work: annotations kept",
			&workv1alpha1.Work{ObjectMeta: meta(map[string]string{"work.flotilla.io/cluster": "m1"})}, map[string]string{"work.flotilla.io/cluster": "m1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 2 { // idempotent
				out, err := Strip(tc.in)
				if err != nil {
					t.Fatal(err)
				}
				m := out.(metav1.Object)
				if m.GetManagedFields() != nil {
					t.Errorf("round %d: managedFields kept: %v", round, m.GetManagedFields())
				}
				if got := m.GetAnnotations(); !reflect.DeepEqual(got, tc.wantAnnotations) {
					t.Errorf("round %d: annotations %v, want %v", round, got, tc.wantAnnotations)
				}
				if m.GetName() != "a" || m.GetNamespace() != "ns" {
					t.Errorf("round %d: identity changed: %s/%s", round, m.GetNamespace(), m.GetName())
				}
			}
		})
	}
}

func TestStripTombstone(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &workv1alpha1.Work{}}
	out, err := Strip(tomb)
	if err != nil || !reflect.DeepEqual(out, tomb) {
		t.Fatalf("Strip(tombstone) = %v, %v; want it unchanged", out, err)
	}
}

// The factory option applies it: what a lister returns has neither.
func TestStripThroughInformerFactory(t *testing.T) {
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: managed(),
		Annotations: map[string]string{AnnotationLastApplied: "{}"}}}
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "flotilla-es-m1", ManagedFields: managed()}}
	client := flotillafake.NewSimpleClientset(tmpl, work)
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(client, 0, flotillainformers.WithTransform(Strip))
	templates := factory.Work().V1alpha1().ResourceTemplates()
	works := factory.Work().V1alpha1().Works()
	templates.Informer()
	works.Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", typ)
		}
	}
	gotTmpl, err := templates.Lister().ResourceTemplates("ns").Get("a")
	if err != nil {
		t.Fatal(err)
	}
	if gotTmpl.ManagedFields != nil || gotTmpl.Annotations != nil {
		t.Errorf("cached template keeps managedFields %v / annotations %v", gotTmpl.ManagedFields, gotTmpl.Annotations)
	}
	gotWork, err := works.Lister().Works("flotilla-es-m1").Get("w")
	if err != nil {
		t.Fatal(err)
	}
	if gotWork.ManagedFields != nil {
		t.Errorf("cached Work keeps managedFields %v", gotWork.ManagedFields)
	}
}

func TestCompactInterns(t *testing.T) {
	work := func(name string) *workv1alpha1.Work {
		return &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: string([]byte("flotilla-es-m1")), ManagedFields: managed(),
				Labels:      map[string]string{string([]byte("work.flotilla.io/binding-uid")): name + "-uid"},
				Annotations: map[string]string{string([]byte("work.flotilla.io/cluster")): string([]byte("m1"))},
				Finalizers:  []string{string([]byte("flotilla.io/execution"))}},
			Status: workv1alpha1.WorkStatus{
				Conditions: []metav1.Condition{{Type: string([]byte("Applied")), Status: metav1.ConditionStatus([]byte("True")),
					Reason: string([]byte("AppliedSuccessful")), Message: string([]byte("1 manifests applied"))}},
				ManifestStatuses: []workv1alpha1.ManifestStatus{{Identifier: workv1alpha1.ResourceIdentifier{
					Group: string([]byte("apps")), Version: string([]byte("v1")), Kind: string([]byte("Deployment")), Name: name},
					Health: workv1alpha1.ResourceHealth([]byte("Healthy"))}},
			},
		}
	}
	a, b := work("a"), work("b")
	want := a.DeepCopy()
	want.ManagedFields = nil
	for _, w := range []*workv1alpha1.Work{a, b} {
		if _, err := Compact(w); err != nil {
			t.Fatal(err)
		}
	}
	if !apiequality.Semantic.DeepEqual(a, want) {
		t.Fatalf("Compact changed the Work's content:\n got %+v\nwant %+v", a, want)
	}
	same := func(what, x, y string) {
		t.Helper()
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s not shared: %q", what, x)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("finalizer", a.Finalizers[0], b.Finalizers[0])
	same("annotation value", a.Annotations["work.flotilla.io/cluster"], b.Annotations["work.flotilla.io/cluster"])
	if reflect.ValueOf(a.Annotations).UnsafePointer() != reflect.ValueOf(b.Annotations).UnsafePointer() {
		t.Error("equal annotations maps are not shared")
	}
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	same("condition message", a.Status.Conditions[0].Message, b.Status.Conditions[0].Message)
	same("identifier kind", a.Status.ManifestStatuses[0].Identifier.Kind, b.Status.ManifestStatuses[0].Identifier.Kind)
	same("health", string(a.Status.ManifestStatuses[0].Health), string(b.Status.ManifestStatuses[0].Health))
	for k := range a.Labels {
		for k2 := range b.Labels {
			same("label key", k, k2)
		}
	}
}

// A long string is left alone: rarely shared, costly to hash.
func TestInternSkipsLongStrings(t *testing.T) {
	long := strings.Repeat("x", maxInterned+1)
	if got := intern(long); unsafe.StringData(got) != unsafe.StringData(long) {
		t.Error("a long string was interned")
	}
	if intern("") != "" {
		t.Error(`intern("") != ""`)
	}
}

// Objects with equal label or annotation maps share one map; a map with
// other content, or one past maxInternedValue, gets its own.
func TestInternMapShares(t *testing.T) {
	placement := strings.Repeat("p", 450) // the scheduler's placement record
	fresh := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[string([]byte(kv[i]))] = string([]byte(kv[i+1]))
		}
		return m
	}
	a := internMap(fresh("policy", "region-4", "placement", placement))
	b := internMap(fresh("placement", placement, "policy", "region-4"))
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Error("equal maps are not shared")
	}
	if !reflect.DeepEqual(a, fresh("policy", "region-4", "placement", placement)) {
		t.Errorf("the shared map's content changed: %v", a)
	}
	c := internMap(fresh("policy", "region-5", "placement", placement))
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(c).UnsafePointer() || c["policy"] != "region-5" {
		t.Errorf("a map with other content was shared: %v", c)
	}
	if unsafe.StringData(a["placement"]) != unsafe.StringData(c["placement"]) {
		t.Error("a long annotation value is not interned")
	}
	// The encoding is injective: moving a character from a key to its value
	// makes another map.
	d, e := internMap(fresh("ab", "c")), internMap(fresh("a", "bc"))
	if d["ab"] != "c" || e["a"] != "bc" {
		t.Errorf("maps with the same concatenation were confused: %v %v", d, e)
	}
	huge := strings.Repeat("h", maxInternedValue+1)
	f, g := internMap(fresh("k", huge)), internMap(fresh("k", huge))
	if reflect.ValueOf(f).UnsafePointer() == reflect.ValueOf(g).UnsafePointer() {
		t.Error("a map past maxInternedValue was shared")
	}
	if unsafe.StringData(f["k"]) == unsafe.StringData(g["k"]) {
		t.Error("a value past maxInternedValue was interned")
	}
}

// The shared maps are bounded: a tenant's many distinct labels only evict.
func TestInternMapBounded(t *testing.T) {
	for i := range maxSharedMaps + 100 {
		internMap(map[string]string{"tenant": strconv.Itoa(i)})
	}
	if n := sharedMaps.Len(); n > maxSharedMaps {
		t.Errorf("%d shared maps kept, more than %d", n, maxSharedMaps)
	}
}

// The bindings of one policy share its placement, and workloads of one
// shape their replica requirements; other content gets its own, and nothing
// changes what the binding says.
func TestCompactSharesBindingSpecParts(t *testing.T) {
	binding := func(name, region string) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: workv1alpha1.ResourceBindingSpec{
				Placement: &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": region}}}},
				ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m")}},
			}}
	}
	a, b, c, bare := binding("a", "r1"), binding("b", "r1"), binding("c", "r2"), binding("bare", "")
	bare.Spec.Placement, bare.Spec.ReplicaRequirements = nil, nil
	want := []*workv1alpha1.ResourceBinding{a.DeepCopy(), b.DeepCopy(), c.DeepCopy(), bare.DeepCopy()}
	for i, o := range []*workv1alpha1.ResourceBinding{a, b, c, bare} {
		if _, err := Compact(o); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(o, want[i]) {
			t.Errorf("Compact changed binding %s:\n got %+v\nwant %+v", o.Name, o.Spec, want[i].Spec)
		}
	}
	if a.Spec.Placement != b.Spec.Placement {
		t.Error("equal placements are not shared")
	}
	if a.Spec.Placement == c.Spec.Placement {
		t.Error("another placement was shared")
	}
	if a.Spec.ReplicaRequirements != b.Spec.ReplicaRequirements || a.Spec.ReplicaRequirements != c.Spec.ReplicaRequirements {
		t.Error("equal replica requirements are not shared")
	}
	if bare.Spec.Placement != nil || bare.Spec.ReplicaRequirements != nil {
		t.Error("a binding without placement got one")
	}
}
