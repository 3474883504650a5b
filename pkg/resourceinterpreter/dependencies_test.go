package resourceinterpreter

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

const fullPodSpec = `{
 "serviceAccountName":"runner",
 "imagePullSecrets":[{"name":"pull"}],
 "volumes":[
  {"name":"a","configMap":{"name":"cm-vol"}},
  {"name":"b","secret":{"secretName":"sec-vol"}},
  {"name":"c","persistentVolumeClaim":{"claimName":"data"}},
  {"name":"d","projected":{"sources":[{"configMap":{"name":"cm-proj"}},{"secret":{"name":"sec-proj"}},{"serviceAccountToken":{"path":"t"}}]}},
  {"name":"e","emptyDir":{}}],
 "initContainers":[{"name":"init","image":"busybox","env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"sec-init","key":"k"}}}]}],
 "containers":[{"name":"app","image":"nginx",
  "env":[{"name":"A","value":"plain"},{"name":"B","valueFrom":{"configMapKeyRef":{"name":"cm-env","key":"k"}}},{"name":"C","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
  "envFrom":[{"configMapRef":{"name":"cm-envfrom"}},{"secretRef":{"name":"sec-envfrom"}},{"configMapRef":{"name":"cm-vol"}}]}]}`

func dep(kind, name string) workv1alpha1.DependencyReference {
	return workv1alpha1.DependencyReference{APIVersion: "v1", Kind: kind, Name: name}
}

var fullDeps = []workv1alpha1.DependencyReference{
	dep("ConfigMap", "cm-env"), dep("ConfigMap", "cm-envfrom"), dep("ConfigMap", "cm-proj"), dep("ConfigMap", "cm-vol"),
	dep("PersistentVolumeClaim", "data"),
	dep("Secret", "pull"), dep("Secret", "sec-envfrom"), dep("Secret", "sec-init"), dep("Secret", "sec-proj"), dep("Secret", "sec-vol"),
	dep("ServiceAccount", "runner"),
}

func TestGetDependencies(t *testing.T) {
	withTemplate := func(apiVersion, kind, pre, post string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","metadata":{"name":"w"},` + pre + fullPodSpec + post + `}`
	}
	tests := []struct {
		name     string
		manifest string
		want     []workv1alpha1.DependencyReference
	}{
		{"Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":` + fullPodSpec + `}`, fullDeps},
		{"Deployment", withTemplate("apps/v1", "Deployment", `"spec":{"template":{"spec":`, `}}`), fullDeps},
		{"ReplicaSet", withTemplate("apps/v1", "ReplicaSet", `"spec":{"template":{"spec":`, `}}`), fullDeps},
		{"StatefulSet", withTemplate("apps/v1", "StatefulSet", `"spec":{"template":{"spec":`, `}}`), fullDeps},
		{"DaemonSet", withTemplate("apps/v1", "DaemonSet", `"spec":{"template":{"spec":`, `}}`), fullDeps},
		{"Job", withTemplate("batch/v1", "Job", `"spec":{"template":{"spec":`, `}}`), fullDeps},
		{"CronJob", withTemplate("batch/v1", "CronJob", `"spec":{"jobTemplate":{"spec":{"template":{"spec":`, `}}}}`), fullDeps},
		{"default service account is no dependency",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"serviceAccountName":"default","containers":[{"name":"a","image":"x"}]}}`, nil},
		{"deprecated serviceAccount field",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"serviceAccount":"old","containers":[{"name":"a","image":"x"}]}}`,
			[]workv1alpha1.DependencyReference{dep("ServiceAccount", "old")}},
		{"kind without a pod template", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}`, nil},
		{"pod template kind in another group is not guessed",
			`{"apiVersion":"example.com/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":` + fullPodSpec + `}}}`, nil},
		{"no pod spec", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON([]byte(tt.manifest)); err != nil {
				t.Fatal(err)
			}
			got, err := GetDependencies(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GetDependencies =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

func TestGetDependenciesMalformedPodSpec(t *testing.T) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"volumes":"not a list"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := GetDependencies(obj); err == nil {
		t.Error("a pod spec that does not parse must be an error, not an empty list")
	}
}

// An object referenced only with optional: true is optional; one referenced
// both ways is required.
func TestOptionalDependencies(t *testing.T) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{
 "volumes":[{"name":"a","configMap":{"name":"cm-opt","optional":true}},{"name":"b","secret":{"secretName":"both","optional":true}}],
 "containers":[{"name":"c","image":"x",
  "envFrom":[{"secretRef":{"name":"both"}},{"configMapRef":{"name":"cm-envfrom-opt","optional":true}}],
  "env":[{"name":"K","valueFrom":{"secretKeyRef":{"name":"sec-key-opt","key":"k","optional":true}}},{"name":"L","valueFrom":{"configMapKeyRef":{"name":"cm-req","key":"k","optional":false}}}]}]}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := OptionalDependencies(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := map[workv1alpha1.DependencyReference]bool{dep("ConfigMap", "cm-opt"): true, dep("ConfigMap", "cm-envfrom-opt"): true, dep("Secret", "sec-key-opt"): true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OptionalDependencies = %v, want %v", got, want)
	}
	all, _ := GetDependencies(obj)
	if len(all) != 5 {
		t.Errorf("GetDependencies = %v; want all five, optional ones included", all)
	}
}
