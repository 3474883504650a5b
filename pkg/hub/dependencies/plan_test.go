package dependencies

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func ref(kind, name string) workv1alpha1.DependencyReference {
	return workv1alpha1.DependencyReference{APIVersion: "v1", Kind: kind, Name: name}
}

func TestWanted(t *testing.T) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"spec":{
		"containers":[{"name":"c","image":"x","envFrom":[{"configMapRef":{"name":"settings"}}]}],
		"volumes":[{"name":"s","secret":{"secretName":"creds"}}]}}}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := Wanted(nil, obj, []workv1alpha1.DependencyReference{ref("ConfigMap", "settings"), ref("Service", "web"),
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []workv1alpha1.DependencyReference{ref("ConfigMap", "settings"), ref("Secret", "creds"), ref("Service", "web")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Wanted = %v, want %v (explicit ones merged, duplicates and the object itself dropped)", got, want)
	}
}

func template(ns, name, manifest string, created time.Time) *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
}

func TestResolve(t *testing.T) {
	now := time.Now()
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds"}}`
	scope := func(gvk schema.GroupVersionKind) (bool, bool) {
		if gvk.Kind == "ClusterRole" {
			return false, true
		}
		return true, true
	}
	tests := []struct {
		name       string
		ref        workv1alpha1.DependencyReference
		candidates []*workv1alpha1.ResourceTemplate
		wantName   string
		problem    string
	}{
		{name: "none", ref: ref("Secret", "creds"), problem: "no ResourceTemplate of namespace a holds it"},
		{name: "own namespace", ref: ref("Secret", "creds"), candidates: []*workv1alpha1.ResourceTemplate{template("a", "creds", secret, now)}, wantName: "creds"},
		{name: "another namespace's template is never taken", ref: ref("Secret", "creds"),
			candidates: []*workv1alpha1.ResourceTemplate{template("b", "creds", secret, now)}, problem: "no ResourceTemplate of namespace a"},
		{name: "a template of the namespace holding another namespace's object is refused", ref: ref("Secret", "creds"),
			candidates: []*workv1alpha1.ResourceTemplate{template("a", "steal", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","namespace":"b"}}`, now)},
			problem:    `holds an object of namespace "b"`},
		{name: "cluster-scoped objects are refused", ref: workv1alpha1.DependencyReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "admin"},
			candidates: []*workv1alpha1.ResourceTemplate{template("a", "admin", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"admin"}}`, now)},
			problem:    "cluster-scoped"},
		{name: "two templates of one object: the older holds it", ref: ref("Secret", "creds"),
			candidates: []*workv1alpha1.ResourceTemplate{template("a", "new", secret, now), template("a", "old", secret, now.Add(-time.Hour))}, wantName: "old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, obj, problem := Resolve("a", tt.ref, tt.candidates, scope)
			if tt.problem != "" {
				if !strings.Contains(problem, tt.problem) || tmpl != nil {
					t.Errorf("problem = %q (template %v), want one containing %q", problem, tmpl, tt.problem)
				}
				return
			}
			if problem != "" || tmpl == nil || tmpl.Name != tt.wantName || obj.GetNamespace() != "a" {
				t.Errorf("Resolve = %v, %v, %q; want template %s", tmpl, obj, problem, tt.wantName)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{
			Clusters:              []workv1alpha1.TargetCluster{{Name: "m3", Replicas: 2}, {Name: "m2", Replicas: 1}},
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "m1"}, {FromCluster: "m2"}},
		}}
	got := Snapshot(b)
	want := workv1alpha1.BindingSnapshot{Namespace: "a", Name: "web-deployment",
		Clusters: []workv1alpha1.TargetCluster{{Name: "m1"}, {Name: "m2"}, {Name: "m3"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Snapshot = %+v, want %+v (the evicted-from cluster kept, replicas left out)", got, want)
	}
	// The dependent's policy settings go with it (issue 30).
	b.Spec.PreserveResourcesOnDeletion = ptr.To(true)
	b.Spec.ApplyStrategy, b.Spec.ConflictResolution = policyv1alpha1.ApplyStrategyReadOnly, policyv1alpha1.ConflictOverwrite
	b.Spec.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
	got = Snapshot(b)
	want.PreserveResourcesOnDeletion, want.ApplyStrategy, want.ConflictResolution = ptr.To(true), policyv1alpha1.ApplyStrategyReadOnly, policyv1alpha1.ConflictOverwrite
	want.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Snapshot = %+v, want %+v (the dependent's settings)", got, want)
	}
	if _, changed := WithRequirement([]workv1alpha1.BindingSnapshot{Snapshot(&workv1alpha1.ResourceBinding{ObjectMeta: b.ObjectMeta, Spec: workv1alpha1.ResourceBindingSpec{
		Clusters: b.Spec.Clusters, GracefulEvictionTasks: b.Spec.GracefulEvictionTasks}})}, got); !changed {
		t.Error("WithRequirement: a change of the dependent's settings alone changed nothing")
	}
}

func TestRequirements(t *testing.T) {
	snap := func(name string, clusters ...string) workv1alpha1.BindingSnapshot {
		s := workv1alpha1.BindingSnapshot{Namespace: "a", Name: name}
		for _, c := range clusters {
			s.Clusters = append(s.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return s
	}
	list := []workv1alpha1.BindingSnapshot{snap("x", "m1")}
	got, changed := WithRequirement(list, snap("x", "m1"))
	if changed || !reflect.DeepEqual(got, list) {
		t.Errorf("same snapshot: changed=%v %v", changed, got)
	}
	got, changed = WithRequirement(list, snap("w", "m2"))
	if !changed || !reflect.DeepEqual(got, []workv1alpha1.BindingSnapshot{snap("w", "m2"), snap("x", "m1")}) {
		t.Errorf("new snapshot: changed=%v %v", changed, got)
	}
	got, changed = WithRequirement(got, snap("x", "m1", "m3"))
	if !changed || !reflect.DeepEqual(got, []workv1alpha1.BindingSnapshot{snap("w", "m2"), snap("x", "m1", "m3")}) {
		t.Errorf("updated snapshot: changed=%v %v", changed, got)
	}
	if !reflect.DeepEqual(list, []workv1alpha1.BindingSnapshot{snap("x", "m1")}) {
		t.Errorf("the input was changed: %v", list)
	}
	got, changed = WithoutRequirement(got, "a", "w")
	if !changed || !reflect.DeepEqual(got, []workv1alpha1.BindingSnapshot{snap("x", "m1", "m3")}) {
		t.Errorf("removed: changed=%v %v", changed, got)
	}
	if _, changed = WithoutRequirement(got, "b", "x"); changed {
		t.Error("an entry of another namespace was removed")
	}
	if got, changed = WithoutRequirement(got, "a", "x"); !changed || got != nil {
		t.Errorf("last removed: changed=%v %v", changed, got)
	}
}

func TestOrphaned(t *testing.T) {
	only := map[string]string{workv1alpha1.LabelDependencyOnly: "true"}
	tests := []struct {
		name string
		b    workv1alpha1.ResourceBinding
		want bool
	}{
		{"dependency-only, nothing requires it", workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Labels: only}}, true},
		{"still required", workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Labels: only},
			Spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{{Name: "x"}}}}, false},
		{"a policy selected it since", workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Labels: only},
			Spec: workv1alpha1.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{}}}, false},
		{"the detector's binding", workv1alpha1.ResourceBinding{}, false},
	}
	for _, tt := range tests {
		if got := Orphaned(&tt.b); got != tt.want {
			t.Errorf("%s: Orphaned = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCondition(t *testing.T) {
	c := Condition(4, 2, nil)
	if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 4 || c.Reason != workv1alpha1.BindingReasonDependenciesResolved {
		t.Errorf("resolved: %+v", c)
	}
	c = Condition(4, 2, []string{"Secret b", "ConfigMap a"})
	if c.Status != metav1.ConditionFalse || c.Reason != workv1alpha1.BindingReasonDependencyMissing || c.Message != "missing dependencies: ConfigMap a; Secret b" {
		t.Errorf("missing: %+v", c)
	}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: 5}}
	b.Status.Conditions = []metav1.Condition{Condition(4, 1, nil)}
	if Resolved(b) {
		t.Error("a condition of an older generation must not count as resolved")
	}
	b.Status.Conditions = []metav1.Condition{Condition(5, 1, nil)}
	if !Resolved(b) {
		t.Error("current True condition: want resolved")
	}
}
