/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package overrides

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// deployment returns a fresh Deployment default/web with one container and
// one init container.
func deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]interface{}{
			"name":        "web",
			"namespace":   "default",
			"labels":      map[string]interface{}{"app": "web", "tier": "front"},
			"annotations": map[string]interface{}{"note": "x"},
		},
		"spec": map[string]interface{}{
			"replicas": int64(1),
			"template": map[string]interface{}{
				"spec": map[string]interface{}{
					"containers": []interface{}{
						map[string]interface{}{
							"name":    "app",
							"image":   "nginx:1.27",
							"command": []interface{}{"nginx", "-g"},
							"args":    []interface{}{"--a", "--b"},
						},
					},
					"initContainers": []interface{}{
						map[string]interface{}{"name": "init", "image": "docker.io/library/busybox:1.36"},
					},
				},
			},
		},
	}}
}

func cluster(name string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func cop(name string, rules ...policyv1alpha1.RuleWithCluster) *policyv1alpha1.ClusterOverridePolicy {
	return &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: rules}}
}

func op(ns, name string, rules ...policyv1alpha1.RuleWithCluster) *policyv1alpha1.OverridePolicy {
	return &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: rules}}
}

func rule(o policyv1alpha1.Overriders, clusters ...string) policyv1alpha1.RuleWithCluster {
	r := policyv1alpha1.RuleWithCluster{Overriders: o}
	if len(clusters) > 0 {
		r.TargetCluster = &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
	}
	return r
}

func plain(operator policyv1alpha1.OverriderOperator, path, value string) policyv1alpha1.Overriders {
	p := policyv1alpha1.PlaintextOverrider{Operator: operator, Path: path}
	if value != "" {
		p.Value = apiextensionsv1.JSON{Raw: []byte(value)}
	}
	return policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{p}}
}

func labelsOv(operator policyv1alpha1.OverriderOperator, kv map[string]string) policyv1alpha1.Overriders {
	return policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{{Operator: operator, Value: kv}}}
}

func field(t *testing.T, obj *unstructured.Unstructured, path ...string) interface{} {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil {
		t.Fatalf("field %v: %v", path, err)
	}
	return v
}

var podSpec = []string{"spec", "template", "spec"}

func container(t *testing.T, obj *unstructured.Unstructured, list string, i int) map[string]interface{} {
	t.Helper()
	l, _ := field(t, obj, append(podSpec, list)...).([]interface{})
	if i >= len(l) {
		t.Fatalf("%s has %d items", list, len(l))
	}
	return l[i].(map[string]interface{})
}

func TestOverriders(t *testing.T) {
	cases := []struct {
		name      string
		o         policyv1alpha1.Overriders
		check     func(t *testing.T, obj *unstructured.Unstructured)
		unapplied bool // nothing took effect: Apply returns nil
	}{
		{
			name: "plaintext replace",
			o:    plain(policyv1alpha1.OverriderOpReplace, "/spec/replicas", "3"),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if got := field(t, obj, "spec", "replicas"); got != int64(3) {
					t.Errorf("replicas = %#v, want int64(3)", got)
				}
			},
		},
		{
			name: "plaintext add",
			o:    plain(policyv1alpha1.OverriderOpAdd, "/spec/paused", "true"),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if got := field(t, obj, "spec", "paused"); got != true {
					t.Errorf("paused = %#v", got)
				}
			},
		},
		{
			name: "plaintext remove",
			o:    plain(policyv1alpha1.OverriderOpRemove, "/metadata/annotations/note", ""),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if _, ok := obj.GetAnnotations()["note"]; ok {
					t.Errorf("annotation note still present")
				}
			},
		},
		{
			name: "image nil predicate changes every container",
			o: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
				{Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpReplace, Value: "quay.io"}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if got := container(t, obj, "containers", 0)["image"]; got != "quay.io/nginx:1.27" {
					t.Errorf("container image = %v", got)
				}
				if got := container(t, obj, "initContainers", 0)["image"]; got != "quay.io/library/busybox:1.36" {
					t.Errorf("init container image = %v", got)
				}
			},
		},
		{
			name: "image predicate",
			o: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{
				Predicate: &policyv1alpha1.ImagePredicate{Path: "/spec/template/spec/containers/0/image"},
				Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpReplace, Value: "1.28"}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if got := container(t, obj, "containers", 0)["image"]; got != "nginx:1.28" {
					t.Errorf("container image = %v", got)
				}
				if got := container(t, obj, "initContainers", 0)["image"]; got != "docker.io/library/busybox:1.36" {
					t.Errorf("init container image changed to %v", got)
				}
			},
		},
		{
			name: "command add",
			o: policyv1alpha1.Overriders{CommandOverrider: []policyv1alpha1.CommandArgsOverrider{
				{ContainerName: "app", Operator: policyv1alpha1.OverriderOpAdd, Value: []string{"daemon off;"}}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := []interface{}{"nginx", "-g", "daemon off;"}
				if got := container(t, obj, "containers", 0)["command"]; !reflect.DeepEqual(got, want) {
					t.Errorf("command = %v, want %v", got, want)
				}
			},
		},
		{
			name: "command add to init container without command",
			o: policyv1alpha1.Overriders{CommandOverrider: []policyv1alpha1.CommandArgsOverrider{
				{ContainerName: "init", Operator: policyv1alpha1.OverriderOpAdd, Value: []string{"sh"}}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := []interface{}{"sh"}
				if got := container(t, obj, "initContainers", 0)["command"]; !reflect.DeepEqual(got, want) {
					t.Errorf("command = %v, want %v", got, want)
				}
			},
		},
		{
			name: "args remove",
			o: policyv1alpha1.Overriders{ArgsOverrider: []policyv1alpha1.CommandArgsOverrider{
				{ContainerName: "app", Operator: policyv1alpha1.OverriderOpRemove, Value: []string{"--a", "--zzz"}}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := []interface{}{"--b"}
				if got := container(t, obj, "containers", 0)["args"]; !reflect.DeepEqual(got, want) {
					t.Errorf("args = %v, want %v", got, want)
				}
			},
		},
		{
			name: "args unknown container",
			o: policyv1alpha1.Overriders{ArgsOverrider: []policyv1alpha1.CommandArgsOverrider{
				{ContainerName: "nope", Operator: policyv1alpha1.OverriderOpAdd, Value: []string{"--x"}}}},
			unapplied: true,
		},
		{
			name: "labels add overwrites and sets",
			o:    labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"app": "web2", "new": "1"}),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := map[string]string{"app": "web2", "tier": "front", "new": "1"}
				if got := obj.GetLabels(); !reflect.DeepEqual(got, want) {
					t.Errorf("labels = %v, want %v", got, want)
				}
			},
		},
		{
			name: "labels replace only existing keys",
			o:    labelsOv(policyv1alpha1.OverriderOpReplace, map[string]string{"tier": "back", "absent": "1"}),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := map[string]string{"app": "web", "tier": "back"}
				if got := obj.GetLabels(); !reflect.DeepEqual(got, want) {
					t.Errorf("labels = %v, want %v", got, want)
				}
			},
		},
		{
			name:      "labels replace of absent key only",
			o:         labelsOv(policyv1alpha1.OverriderOpReplace, map[string]string{"absent": "1"}),
			unapplied: true,
		},
		{
			name: "labels remove",
			o:    labelsOv(policyv1alpha1.OverriderOpRemove, map[string]string{"tier": ""}),
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := map[string]string{"app": "web"}
				if got := obj.GetLabels(); !reflect.DeepEqual(got, want) {
					t.Errorf("labels = %v, want %v", got, want)
				}
			},
		},
		{
			name: "annotations add",
			o: policyv1alpha1.Overriders{AnnotationsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
				{Operator: policyv1alpha1.OverriderOpAdd, Value: map[string]string{"a": "b"}}}},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				want := map[string]string{"note": "x", "a": "b"}
				if got := obj.GetAnnotations(); !reflect.DeepEqual(got, want) {
					t.Errorf("annotations = %v, want %v", got, want)
				}
			},
		},
		{
			name: "plaintext runs after image within a rule",
			o: policyv1alpha1.Overriders{
				Plaintext: []policyv1alpha1.PlaintextOverrider{{Operator: policyv1alpha1.OverriderOpReplace,
					Path: "/spec/template/spec/containers/0/image", Value: apiextensionsv1.JSON{Raw: []byte(`"busybox"`)}}},
				ImageOverrider: []policyv1alpha1.ImageOverrider{
					{Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpReplace, Value: "2"}},
			},
			check: func(t *testing.T, obj *unstructured.Unstructured) {
				if got := container(t, obj, "containers", 0)["image"]; got != "busybox" {
					t.Errorf("image = %v, want busybox (plaintext last)", got)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := deployment()
			p := cop("p", rule(tc.o))
			before := p.DeepCopy()
			res, err := Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{p}, nil)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(p, before) {
				t.Errorf("Apply modified the policy")
			}
			if tc.unapplied {
				if res != nil {
					t.Errorf("result = %+v, want nil", res)
				}
				if !reflect.DeepEqual(obj, deployment()) {
					t.Errorf("object changed: %v", obj.Object)
				}
				return
			}
			if res == nil || len(res.ClusterOverridePolicies) != 1 || res.ClusterOverridePolicies[0].PolicyName != "p" {
				t.Fatalf("result = %+v, want one record for p", res)
			}
			if !reflect.DeepEqual(res.ClusterOverridePolicies[0].Overriders, tc.o) {
				t.Errorf("recorded %+v, want %+v", res.ClusterOverridePolicies[0].Overriders, tc.o)
			}
			tc.check(t, obj)
		})
	}
}

func TestOrdering(t *testing.T) {
	// Every policy appends its name to the image tag, so the final tag shows
	// both the order and that each policy sees the previous one's result.
	tag := func(s string) policyv1alpha1.RuleWithCluster {
		return rule(policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
			{Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpAdd, Value: "-" + s}}})
	}
	// Passed out of order, namespaced first: Apply sorts.
	ops := []*policyv1alpha1.OverridePolicy{op("default", "z", tag("z")), op("default", "a", tag("a"))}
	cps := []*policyv1alpha1.ClusterOverridePolicy{cop("c2", tag("c2")), cop("c1", tag("c1")), cop("c3", tag("c3"))}

	obj := deployment()
	res, err := Apply(obj, cluster("m1"), cps, ops)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := container(t, obj, "containers", 0)["image"], "nginx:1.27-c1-c2-c3-a-z"; got != want {
		t.Errorf("image = %v, want %v", got, want)
	}
	var names []string
	for _, p := range res.ClusterOverridePolicies {
		names = append(names, p.PolicyName)
	}
	for _, p := range res.OverridePolicies {
		names = append(names, p.PolicyName)
	}
	if want := []string{"c1", "c2", "c3", "a", "z"}; !reflect.DeepEqual(names, want) {
		t.Errorf("recorded order %v, want %v", names, want)
	}
	if cps[0].Name != "c2" || ops[0].Name != "z" {
		t.Errorf("Apply reordered the caller's slices")
	}
}

func TestClusterPolicyNameOrder(t *testing.T) {
	obj := deployment()
	set := func(v string) policyv1alpha1.Overriders {
		return labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"x": v})
	}
	_, err := Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{cop("b", rule(set("b"))), cop("a", rule(set("a")))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.GetLabels()["x"]; got != "b" {
		t.Errorf("x = %q, want b (applied last by name)", got)
	}
}

func TestTargetCluster(t *testing.T) {
	p := cop("p",
		rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"m1": "y"}), "m1"),
		rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"m2": "y"}), "m2"),
		rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"all": "y"})),
	)
	cases := []struct {
		cluster string
		want    []string // label keys added
	}{
		{"m1", []string{"m1", "all"}},
		{"m2", []string{"m2", "all"}},
		{"m3", []string{"all"}},
	}
	for _, tc := range cases {
		t.Run(tc.cluster, func(t *testing.T) {
			obj := deployment()
			res, err := Apply(obj, cluster(tc.cluster), []*policyv1alpha1.ClusterOverridePolicy{p}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"m1", "m2", "all"} {
				_, got := obj.GetLabels()[k]
				want := strings.Contains(" "+strings.Join(tc.want, " ")+" ", " "+k+" ")
				if got != want {
					t.Errorf("label %s present = %v, want %v", k, got, want)
				}
			}
			// The rules that matched are merged into one record.
			if n := len(res.ClusterOverridePolicies[0].Overriders.LabelsOverrider); n != len(tc.want) {
				t.Errorf("recorded %d labels overriders, want %d", n, len(tc.want))
			}
		})
	}

	obj := deployment()
	res, err := Apply(obj, cluster("m9"), []*policyv1alpha1.ClusterOverridePolicy{
		cop("only-m1", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"}), "m1"))}, nil)
	if err != nil || res != nil {
		t.Errorf("non-matching cluster: res=%+v err=%v, want nil, nil", res, err)
	}
}

func TestOverridePolicyNamespaceScope(t *testing.T) {
	cases := []struct {
		ns   string
		want bool
	}{
		{"default", true},
		{"other", false},
	}
	for _, tc := range cases {
		obj := deployment()
		res, err := Apply(obj, cluster("m1"), nil, []*policyv1alpha1.OverridePolicy{
			op(tc.ns, "p", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"})))})
		if err != nil {
			t.Fatal(err)
		}
		if got := res != nil; got != tc.want {
			t.Errorf("policy in %s applied = %v, want %v", tc.ns, got, tc.want)
		}
		if got := obj.GetLabels()["k"] == "v"; got != tc.want {
			t.Errorf("policy in %s changed the object = %v, want %v", tc.ns, got, tc.want)
		}
	}
}

func TestSelectorMatches(t *testing.T) {
	sel := func(mut func(*policyv1alpha1.ResourceSelector)) policyv1alpha1.ResourceSelector {
		s := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}
		mut(&s)
		return s
	}
	ls := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	cases := []struct {
		name string
		sel  policyv1alpha1.ResourceSelector
		want bool
	}{
		{"kind only", sel(func(*policyv1alpha1.ResourceSelector) {}), true},
		{"kind mismatch", sel(func(s *policyv1alpha1.ResourceSelector) { s.Kind = "StatefulSet" }), false},
		{"apiVersion mismatch", sel(func(s *policyv1alpha1.ResourceSelector) { s.APIVersion = "apps/v1beta1" }), false},
		{"namespace", sel(func(s *policyv1alpha1.ResourceSelector) { s.Namespace = "default" }), true},
		{"namespace mismatch", sel(func(s *policyv1alpha1.ResourceSelector) { s.Namespace = "other" }), false},
		{"name", sel(func(s *policyv1alpha1.ResourceSelector) { s.Name = "web" }), true},
		{"name mismatch", sel(func(s *policyv1alpha1.ResourceSelector) { s.Name = "api" }), false},
		{"name ignores labelSelector", sel(func(s *policyv1alpha1.ResourceSelector) { s.Name = "web"; s.LabelSelector = ls("app", "other") }), true},
		{"labelSelector", sel(func(s *policyv1alpha1.ResourceSelector) { s.LabelSelector = ls("app", "web") }), true},
		{"labelSelector mismatch", sel(func(s *policyv1alpha1.ResourceSelector) { s.LabelSelector = ls("app", "api") }), false},
		{"invalid labelSelector", sel(func(s *policyv1alpha1.ResourceSelector) {
			s.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		}), false},
	}
	for _, tc := range cases {
		if got := SelectorMatches(tc.sel, deployment()); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// A policy applies when any of its selectors matches.
	p := cop("p", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"})))
	p.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{cases[1].sel}
	if res, _ := Apply(deployment(), cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{p}, nil); res != nil {
		t.Errorf("policy with a non-matching selector applied")
	}
	p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, cases[5].sel)
	if res, _ := Apply(deployment(), cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{p}, nil); res == nil {
		t.Errorf("policy with one matching selector did not apply")
	}
}

func TestNothingApplies(t *testing.T) {
	obj := deployment()
	res, err := Apply(obj, cluster("m1"), nil, nil)
	if res != nil || err != nil {
		t.Errorf("no policies: res=%+v err=%v", res, err)
	}
	// A policy with no rules, or nil entries, changes nothing either.
	res, err = Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{nil, cop("empty")}, []*policyv1alpha1.OverridePolicy{nil})
	if res != nil || err != nil {
		t.Errorf("empty policy: res=%+v err=%v", res, err)
	}
	if !reflect.DeepEqual(obj, deployment()) {
		t.Errorf("object changed")
	}
	// An image overrider on a kind without a pod template finds no image.
	cm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "c", "namespace": "default"}}}
	res, err = Apply(cm, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{cop("img", rule(policyv1alpha1.Overriders{
		ImageOverrider: []policyv1alpha1.ImageOverrider{{Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpRemove}}}))}, nil)
	if res != nil || err != nil {
		t.Errorf("image on ConfigMap: res=%+v err=%v", res, err)
	}
	// Nil object and nil cluster don't panic.
	if res, err := Apply(nil, nil, []*policyv1alpha1.ClusterOverridePolicy{cop("p")}, nil); res != nil || err != nil {
		t.Errorf("nil object: res=%+v err=%v", res, err)
	}
	if _, err := Apply(deployment(), nil, []*policyv1alpha1.ClusterOverridePolicy{
		cop("p", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"}), "m1"))}, nil); err != nil {
		t.Errorf("nil cluster: %v", err)
	}
}

func TestErrors(t *testing.T) {
	imagePred := func(path string) policyv1alpha1.Overriders {
		return policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{
			Predicate: &policyv1alpha1.ImagePredicate{Path: path},
			Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpReplace, Value: "1"}}}
	}
	cases := []struct {
		name    string
		cluster bool // as a ClusterOverridePolicy, else OverridePolicy default/bad
		o       policyv1alpha1.Overriders
		want    []string
	}{
		{"remove missing field", false, plain(policyv1alpha1.OverriderOpRemove, "/spec/nope", ""),
			[]string{"OverridePolicy default/bad", "plaintext remove /spec/nope"}},
		{"remove missing field, cluster policy", true, plain(policyv1alpha1.OverriderOpRemove, "/spec/nope", ""),
			[]string{"ClusterOverridePolicy bad", "plaintext remove /spec/nope"}},
		{"malformed value", false, plain(policyv1alpha1.OverriderOpAdd, "/spec/x", "{not json"),
			[]string{"OverridePolicy default/bad", "plaintext add /spec/x", "not valid JSON"}},
		{"unknown plaintext operator", true, plain("move", "/spec/x", "1"), []string{"ClusterOverridePolicy bad", "unknown operator"}},
		{"replace root with a scalar", true, plain(policyv1alpha1.OverriderOpReplace, "", "1"), []string{"ClusterOverridePolicy bad", "plaintext replace"}},
		{"predicate not a string", false, imagePred("/spec/replicas"), []string{"OverridePolicy default/bad", "imageOverrider", "not a string"}},
		{"predicate missing", false, imagePred("/spec/template/spec/containers/5/image"), []string{"OverridePolicy default/bad", "invalid array index"}},
		{"predicate not a pointer", false, imagePred("spec"), []string{"OverridePolicy default/bad", "must start with /"}},
		{"unknown image component", true, policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
			{Component: "Digest", Operator: policyv1alpha1.OverriderOpAdd}}}, []string{"ClusterOverridePolicy bad", "unknown image component"}},
		{"command not a list", true, policyv1alpha1.Overriders{}, []string{"ClusterOverridePolicy bad", "command is a string"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := deployment()
			if tc.name == "command not a list" {
				container(t, obj, "containers", 0)["command"] = "nginx"
				tc.o.CommandOverrider = []policyv1alpha1.CommandArgsOverrider{{ContainerName: "app", Operator: policyv1alpha1.OverriderOpAdd}}
			}
			// A good policy runs first: on error its change must not leak.
			good := cop("a-good", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"})))
			cps := []*policyv1alpha1.ClusterOverridePolicy{good}
			var ops []*policyv1alpha1.OverridePolicy
			if tc.cluster {
				cps = append(cps, cop("bad", rule(tc.o)))
			} else {
				ops = append(ops, op("default", "bad", rule(tc.o)))
			}
			orig := obj.DeepCopy()
			res, err := Apply(obj, cluster("m1"), cps, ops)
			if err == nil {
				t.Fatalf("no error, result %+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if res != nil {
				t.Errorf("result %+v on error", res)
			}
			if !reflect.DeepEqual(obj, orig) {
				t.Errorf("object changed on error: %v", obj.Object)
			}
		})
	}
}

func TestImage(t *testing.T) {
	ov := func(c policyv1alpha1.ImageComponent, o policyv1alpha1.OverriderOperator, v string) *policyv1alpha1.ImageOverrider {
		return &policyv1alpha1.ImageOverrider{Component: c, Operator: o, Value: v}
	}
	const (
		add     = policyv1alpha1.OverriderOpAdd
		replace = policyv1alpha1.OverriderOpReplace
		remove  = policyv1alpha1.OverriderOpRemove
	)
	digest := "sha256:" + strings.Repeat("a", 64)
	cases := []struct {
		image string
		ov    *policyv1alpha1.ImageOverrider
		want  string
	}{
		{"nginx:1.27", ov(policyv1alpha1.Registry, add, "registry.example.com"), "registry.example.com/nginx:1.27"},
		{"nginx:1.27", ov(policyv1alpha1.Tag, replace, "1.28"), "nginx:1.28"},
		{"docker.io/library/nginx:1.27", ov(policyv1alpha1.Registry, replace, "quay.io"), "quay.io/library/nginx:1.27"},
		{"docker.io/library/nginx:1.27", ov(policyv1alpha1.Registry, remove, ""), "library/nginx:1.27"},
		{"docker.io/library/nginx:1.27", ov(policyv1alpha1.Registry, add, "-cn"), "docker.io-cn/library/nginx:1.27"},
		{"library/nginx:1.27", ov(policyv1alpha1.Registry, replace, "quay.io"), "quay.io/library/nginx:1.27"},
		{"nginx:1.27", ov(policyv1alpha1.Repository, add, "-slim"), "nginx-slim:1.27"},
		{"nginx:1.27", ov(policyv1alpha1.Repository, replace, "team/web"), "team/web:1.27"},
		{"nginx:1.27", ov(policyv1alpha1.Tag, add, "-alpine"), "nginx:1.27-alpine"},
		{"nginx:1.27", ov(policyv1alpha1.Tag, remove, ""), "nginx"},
		{"nginx", ov(policyv1alpha1.Tag, add, "1.27"), "nginx:1.27"},
		{"localhost:5000/app:v1", ov(policyv1alpha1.Tag, replace, "v2"), "localhost:5000/app:v2"},
		{"localhost:5000/app:v1", ov(policyv1alpha1.Registry, replace, "reg.example.com:443"), "reg.example.com:443/app:v1"},
		{"localhost:5000/app", ov(policyv1alpha1.Repository, replace, "other"), "localhost:5000/other"},
		{"localhost/app:v1", ov(policyv1alpha1.Registry, remove, ""), "app:v1"},
		{"nginx@" + digest, ov(policyv1alpha1.Registry, add, "quay.io"), "quay.io/nginx@" + digest},
		{"nginx@" + digest, ov(policyv1alpha1.Tag, replace, "1.28"), "nginx:1.28"},
		{"nginx:1.27", ov(policyv1alpha1.Tag, replace, digest), "nginx@" + digest},
		{"nginx:1.27@" + digest, ov(policyv1alpha1.Registry, add, "quay.io"), "quay.io/nginx:1.27@" + digest},
		{"nginx:1.27@" + digest, ov(policyv1alpha1.Tag, replace, "1.28"), "nginx:1.28"},
	}
	for _, tc := range cases {
		got, err := overrideImage(tc.image, tc.ov)
		if err != nil {
			t.Errorf("%s %s %s %q: %v", tc.image, tc.ov.Component, tc.ov.Operator, tc.ov.Value, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s %s %s %q = %q, want %q", tc.image, tc.ov.Component, tc.ov.Operator, tc.ov.Value, got, tc.want)
		}
	}
}

func TestParseImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("b", 64)
	cases := []struct {
		image string
		want  imageRef
	}{
		{"nginx", imageRef{repository: "nginx"}},
		{"nginx:1.27", imageRef{repository: "nginx", tag: "1.27", sep: ':'}},
		{"library/nginx:1.27", imageRef{repository: "library/nginx", tag: "1.27", sep: ':'}},
		{"docker.io/library/nginx:1.27", imageRef{registry: "docker.io", repository: "library/nginx", tag: "1.27", sep: ':'}},
		{"localhost:5000/app:v1", imageRef{registry: "localhost:5000", repository: "app", tag: "v1", sep: ':'}},
		{"localhost:5000/app", imageRef{registry: "localhost:5000", repository: "app"}},
		{"localhost/app", imageRef{registry: "localhost", repository: "app"}},
		{"nginx@" + digest, imageRef{repository: "nginx", tag: digest, sep: '@'}},
		{"quay.io/a/b:v1@" + digest, imageRef{registry: "quay.io", repository: "a/b", tag: "v1@" + digest, sep: ':'}},
	}
	for _, tc := range cases {
		got := parseImage(tc.image)
		if got != tc.want {
			t.Errorf("parseImage(%q) = %+v, want %+v", tc.image, got, tc.want)
		}
		if s := got.String(); s != tc.image {
			t.Errorf("parseImage(%q).String() = %q", tc.image, s)
		}
	}
}

// TestAppliedOverridesJSON pins the annotation's wire format.
func TestAppliedOverridesJSON(t *testing.T) {
	obj := deployment()
	res, err := Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{
		cop("c", rule(labelsOv(policyv1alpha1.OverriderOpAdd, map[string]string{"k": "v"})))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"clusterOverridePolicies":[{"policyName":"c","overriders":{"labelsOverrider":[{"operator":"add","value":{"k":"v"}}]}}]}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

// FuzzApplyPlaintext checks that no plaintext operation panics.
func FuzzApplyPlaintext(f *testing.F) {
	f.Add("add", "/spec/replicas", []byte("2"))
	f.Add("replace", "/spec/template/spec/containers/0/image", []byte(`"x"`))
	f.Add("remove", "/metadata/labels/app", []byte(nil))
	f.Add("remove", "/spec/nope", []byte(nil))
	f.Add("add", "/spec/template/spec/containers/-", []byte(`{"name":"b"}`))
	f.Add("replace", "", []byte(`null`))
	f.Add("replace", "", []byte(`[]`))
	f.Add("add", "/a~1b/~0", []byte(`{`))
	f.Add("move", "/spec", []byte(`1`))
	f.Add("add", "/spec/template/spec/containers/99999999999999999999", []byte(`1`))
	f.Add("remove", "/spec/template/spec/containers/-1", []byte(nil))
	f.Fuzz(func(t *testing.T, operator, path string, value []byte) {
		p := cop("p", rule(policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
			Operator: policyv1alpha1.OverriderOperator(operator), Path: path, Value: apiextensionsv1.JSON{Raw: value}}}}))
		obj := deployment()
		res, err := Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{p}, nil)
		if err == nil && res == nil {
			t.Errorf("plaintext succeeded but was not recorded")
		}
		if err != nil && !reflect.DeepEqual(obj, deployment()) {
			t.Errorf("object changed on error")
		}
	})
}

// FuzzImage checks that image overriders never panic, neither on the image
// text nor on a predicate path.
func FuzzImage(f *testing.F) {
	f.Add("nginx:1.27", "Registry", "add", "registry.example.com", "")
	f.Add("docker.io/library/nginx:1.27", "Registry", "remove", "", "")
	f.Add("localhost:5000/app:v1", "Tag", "replace", "v2", "/spec/template/spec/containers/0/image")
	f.Add("nginx@sha256:abc", "Tag", "add", "x", "/spec/template/spec/initContainers/0/image")
	f.Add("", "Repository", "replace", "", "/")
	f.Add("a:b:c/d@e@f", "Tag", "replace", "@:", "/spec/replicas/0")
	f.Add("/:@", "Registry", "add", "/", "/spec/template/spec/containers/01/image")
	f.Add("x", "Tag", "bogus", "y", "/metadata/labels/app")
	f.Fuzz(func(t *testing.T, image, component, operator, value, path string) {
		ref := parseImage(image)
		_ = ref.String()
		io := policyv1alpha1.ImageOverrider{Component: policyv1alpha1.ImageComponent(component),
			Operator: policyv1alpha1.OverriderOperator(operator), Value: value}
		if path != "" {
			io.Predicate = &policyv1alpha1.ImagePredicate{Path: path}
		}
		obj := deployment()
		container(t, obj, "containers", 0)["image"] = image
		p := cop("p", rule(policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{io}}))
		_, _ = Apply(obj, cluster("m1"), []*policyv1alpha1.ClusterOverridePolicy{p}, nil)
	})
}
