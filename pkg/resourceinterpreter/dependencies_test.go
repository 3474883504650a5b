package resourceinterpreter

import (
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
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

// A customization's podTemplateDependencies reads a custom kind's pod
// template exactly as the built-in interpreter reads a Deployment's: the
// same dependencies, the same optional ones (and an entry of the rule
// without optional is required). Seeds of random templates replay with
// FLOTILLA_DEPS_SEED.
func TestPodTemplateDependenciesAgreesWithBuiltIn(t *testing.T) {
	t.Parallel()
	i := New()
	i.Set(&configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "clonesets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet"},
			Customizations: configv1alpha1.CustomizationRules{DependencyInterpretation: &configv1alpha1.DependencyInterpretation{
				Expression: "podTemplateDependencies(object.spec.template)"}},
		},
	})
	seed := time.Now().UnixNano()
	if s := os.Getenv("FLOTILLA_DEPS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("FLOTILLA_DEPS_SEED=%d", seed)
	rng := rand.New(rand.NewSource(seed))
	specs := []string{fullPodSpec, `{"containers":[{"name":"a","image":"x"}]}`, `{"serviceAccountName":"default","containers":[{"name":"a","image":"x"}]}`}
	for n := 0; n < 200; n++ {
		specs = append(specs, randomPodSpec(rng))
	}
	for n, spec := range specs {
		wrap := func(apiVersion, kind string) *unstructured.Unstructured {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"` + apiVersion + `","kind":"` + kind +
				`","metadata":{"name":"w","namespace":"shop"},"spec":{"replicas":2,"template":{"spec":` + spec + `}}}`)); err != nil {
				t.Fatal(err)
			}
			return obj
		}
		deployment, cloneSet := wrap("apps/v1", "Deployment"), wrap("apps.kruise.io/v1alpha1", "CloneSet")
		want, err := i.GetDependencies(deployment)
		if err != nil {
			t.Fatal(err)
		}
		got, err := i.GetDependencies(cloneSet)
		if err != nil {
			t.Fatalf("spec %d: %v\n%s", n, err, spec)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("spec %d: customization %v, built-in %v\n%s", n, got, want, spec)
		}
		wantOpt, _ := i.OptionalDependencies(deployment)
		gotOpt, err := i.OptionalDependencies(cloneSet)
		if err != nil {
			t.Fatal(err)
		}
		if len(gotOpt) != len(wantOpt) || (len(wantOpt) > 0 && !reflect.DeepEqual(gotOpt, wantOpt)) {
			t.Fatalf("spec %d: optional: customization %v, built-in %v\n%s", n, gotOpt, wantOpt, spec)
		}
	}
}

// randomPodSpec references a few names from a small pool in random places,
// some optional, so that one object is often referenced both ways.
func randomPodSpec(rng *rand.Rand) string {
	name := func() string { return fmt.Sprintf("n%d", rng.Intn(4)) }
	opt := func() string {
		switch rng.Intn(3) {
		case 0:
			return ""
		case 1:
			return `,"optional":true`
		}
		return `,"optional":false`
	}
	var volumes, envs, envFroms []string
	for k := rng.Intn(4); k > 0; k-- {
		switch rng.Intn(5) {
		case 0:
			volumes = append(volumes, `{"name":"v","configMap":{"name":"`+name()+`"`+opt()+`}}`)
		case 1:
			volumes = append(volumes, `{"name":"v","secret":{"secretName":"`+name()+`"`+opt()+`}}`)
		case 2:
			volumes = append(volumes, `{"name":"v","persistentVolumeClaim":{"claimName":"`+name()+`"}}`)
		case 3:
			volumes = append(volumes, `{"name":"v","projected":{"sources":[{"configMap":{"name":"`+name()+`"`+opt()+`}},{"secret":{"name":"`+name()+`"`+opt()+`}}]}}`)
		case 4:
			volumes = append(volumes, `{"name":"v","rbd":{"monitors":["m"],"image":"i","secretRef":{"name":"`+name()+`"}}}`)
		}
	}
	for k := rng.Intn(4); k > 0; k-- {
		if rng.Intn(2) == 0 {
			envs = append(envs, `{"name":"E","valueFrom":{"configMapKeyRef":{"name":"`+name()+`","key":"k"`+opt()+`}}}`)
		} else {
			envs = append(envs, `{"name":"E","valueFrom":{"secretKeyRef":{"name":"`+name()+`","key":"k"`+opt()+`}}}`)
		}
	}
	for k := rng.Intn(3); k > 0; k-- {
		if rng.Intn(2) == 0 {
			envFroms = append(envFroms, `{"configMapRef":{"name":"`+name()+`"`+opt()+`}}`)
		} else {
			envFroms = append(envFroms, `{"secretRef":{"name":"`+name()+`"`+opt()+`}}`)
		}
	}
	sa := ""
	if rng.Intn(2) == 0 {
		sa = `"serviceAccountName":"` + []string{"default", "runner"}[rng.Intn(2)] + `",`
	}
	pull := ""
	if rng.Intn(3) == 0 {
		pull = `"imagePullSecrets":[{"name":"` + name() + `"}],`
	}
	container := `{"name":"c","image":"x","env":[` + strings.Join(envs, ",") + `],"envFrom":[` + strings.Join(envFroms, ",") + `]}`
	containers := `"containers":[` + container + `]`
	if rng.Intn(3) == 0 {
		containers = `"initContainers":[` + container + `],"containers":[{"name":"d","image":"x"}]`
	}
	return `{` + sa + pull + `"volumes":[` + strings.Join(volumes, ",") + `],` + containers + `}`
}

// Volume sources whose credentials are a Secret of the pod's namespace
// (Kubernetes' VisitPodSecretNames, as Karmada reads them).
func TestVolumeCredentialSecrets(t *testing.T) {
	t.Parallel()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x"}],
	 "volumes":[{"name":"a","csi":{"driver":"d","nodePublishSecretRef":{"name":"csi"}}},{"name":"b","azureFile":{"secretName":"azure","shareName":"s"}},
	  {"name":"c","cephfs":{"monitors":["m"],"secretRef":{"name":"ceph"}}},{"name":"d","cinder":{"volumeID":"v","secretRef":{"name":"cinder"}}},
	  {"name":"e","flexVolume":{"driver":"d","secretRef":{"name":"flex"}}},{"name":"f","iscsi":{"targetPortal":"t","iqn":"i","lun":0,"secretRef":{"name":"iscsi"}}},
	  {"name":"g","rbd":{"monitors":["m"],"image":"i","secretRef":{"name":"rbd"}}},{"name":"h","scaleIO":{"gateway":"g","system":"s","secretRef":{"name":"scaleio"}}},
	  {"name":"i","storageos":{"volumeName":"v","secretRef":{"name":"storageos"}}}]}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := GetDependencies(obj)
	if err != nil {
		t.Fatal(err)
	}
	var want []workv1alpha1.DependencyReference
	for _, n := range []string{"azure", "ceph", "cinder", "csi", "flex", "iscsi", "rbd", "scaleio", "storageos"} {
		want = append(want, dep("Secret", n))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetDependencies = %v, want %v", got, want)
	}
}
