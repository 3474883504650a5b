package wrap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
)

const e2eTestdata = "../../e2e/testdata"

// strictDecoder decodes Flotilla objects and refuses unknown or duplicate
// fields, as `kubectl apply --validate=strict` would.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// originals reads a file's objects independently of the code under test:
// documents in order, List items flattened.
func originals(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var m map[string]any
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		if items, ok := m["items"].([]any); ok && strings.HasSuffix(m["kind"].(string), "List") {
			for _, it := range items {
				out = append(out, it.(map[string]any))
			}
			continue
		}
		out = append(out, m)
	}
}

// decodeStream splits a YAML stream and decodes each document strictly
// with the Flotilla scheme.
func decodeStream(t *testing.T, data []byte) []runtime.Object {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("output is not a valid Flotilla object: %v\n%s", err, doc)
		}
		out = append(out, obj)
	}
}

// Every file in e2e/testdata wraps into templates that decode strictly as
// Flotilla objects, whose manifests are the original objects minus the
// stripped fields, in input order; namespaced kinds become
// ResourceTemplates in the object's namespace (or the default), others
// ClusterResourceTemplates.
func TestWrapRoundTripsE2ETestdata(t *testing.T) {
	var files []string
	err := filepath.WalkDir(e2eTestdata, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && hasManifestExtension(path) {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) < 8 {
		t.Fatalf("e2e/testdata: %d files, %v", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Wrap([]Input{{Name: file, Data: data}}, Options{Namespace: "apps"})
			if err != nil {
				t.Fatal(err)
			}
			want := originals(t, data)
			out, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeStream(t, out)
			if len(objs) != len(want) {
				t.Fatalf("%d objects out, %d in", len(objs), len(want))
			}
			for i, obj := range objs {
				orig := &unstructured.Unstructured{Object: want[i]}
				Strip(orig)
				var manifest []byte
				var namespace string
				switch tmpl := obj.(type) {
				case *workv1alpha1.ResourceTemplate:
					manifest, namespace = tmpl.Spec.Manifest.Raw, tmpl.Namespace
					if ns := orig.GetNamespace(); ns != "" && namespace != ns || ns == "" && namespace != "apps" {
						t.Errorf("%s: template namespace %q, object namespace %q", orig.GetName(), namespace, ns)
					}
				case *workv1alpha1.ClusterResourceTemplate:
					manifest, namespace = tmpl.Spec.Manifest.Raw, tmpl.Namespace
					if namespace != "" || !clusterScoped[orig.GroupVersionKind().GroupKind()] {
						t.Errorf("%s %s: ClusterResourceTemplate for a namespaced kind", orig.GetKind(), orig.GetName())
					}
				default:
					t.Fatalf("object %d is a %T", i, obj)
				}
				var got map[string]any
				if err := utiljson.Unmarshal(manifest, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, orig.Object) {
					t.Errorf("object %d: manifest\n%v\nwant\n%v", i, got, orig.Object)
				}
				for _, f := range serverFields {
					if _, found, _ := unstructured.NestedFieldNoCopy(got, "metadata", f); found {
						t.Errorf("object %d: metadata.%s not stripped", i, f)
					}
				}
				if _, ok := got["status"]; ok {
					t.Errorf("object %d: status not stripped", i)
				}
			}

			// Wrapping the output again changes nothing: Flotilla objects
			// pass through.
			again, err := Wrap([]Input{{Name: "out", Data: out}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			out2, _ := again.YAML()
			if !bytes.Equal(out, out2) {
				t.Errorf("wrapping the output again changed it:\n%s\n---- vs ----\n%s", out, out2)
			}
		})
	}
}

// The whole directory, recursively, as `hub wrap -R -f e2e/testdata`:
// objects of different kinds sharing a name and namespace get the kind in
// their template's name, with a note.
func TestWrapDirectoryNamesCollidingTemplates(t *testing.T) {
	inputs, err := ReadInputs([]string{e2eTestdata}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Wrap(inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, o := range res.Objects {
		names[o.GetKind()+" "+describeName(o.GetNamespace(), o.GetName())] = true
	}
	for _, want := range []string{
		"ResourceTemplate e2e-works/web-deployment", "ResourceTemplate e2e-works/web-service",
		"ResourceTemplate e2e-works/web-configmap", "ResourceTemplate e2e-works/web-serviceaccount",
		"ResourceTemplate default/nginx", "ResourceTemplate default/web", "ResourceTemplate e2e-works/web-config",
		"ClusterResourceTemplate e2e-works", "ClusterResourceTemplate e2e-web-reader-clusterrole",
		"ClusterResourceTemplate e2e-web-reader-clusterrolebinding", "ResourceTemplate e2e-canary/canary",
	} {
		if !names[want] {
			t.Errorf("missing %s in %v", want, names)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "Service e2e-works/web: template named web-service") {
		t.Errorf("no note for the renamed Service:\n%s", notes)
	}
}

func TestReadInputsDirectories(t *testing.T) {
	flat, err := ReadInputs([]string{e2eTestdata}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	deep, err := ReadInputs([]string{e2eTestdata, Stdin}, true, strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	has := func(in []Input, suffix string) bool {
		for _, i := range in {
			if strings.HasSuffix(i.Name, suffix) {
				return true
			}
		}
		return false
	}
	if has(flat, "clusterrole.yaml") || !has(deep, filepath.Join("rbac", "clusterrole.yaml")) {
		t.Errorf("subdirectories: without -R %v, with -R %v", flat, deep)
	}
	if has(flat, "README.md") {
		t.Errorf("README.md read from a directory")
	}
	if !has(flat, "web-app.json") || !has(deep, "<stdin>") {
		t.Errorf("json file or stdin missing")
	}
	if _, err := ReadInputs([]string{"does-not-exist.yaml"}, false, nil); err == nil {
		t.Error("missing file: no error")
	}
}

// Bad input is an error naming the file and the document (and List item),
// and there is no output at all.
func TestWrapBadInput(t *testing.T) {
	cases := []struct {
		name, data string
		opts       Options
		want       []string
	}{
		{"invalid YAML", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [unclosed\n", Options{},
			[]string{"bad.yaml, document 2", "not valid YAML"}},
		{"no apiVersion", "kind: ConfigMap\nmetadata: {name: a}\n", Options{}, []string{"bad.yaml, document 1", "ConfigMap has no apiVersion"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", Options{}, []string{"object has no kind"}},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\n", Options{}, []string{"bad.yaml, document 2", "no metadata.name"}},
		{"generateName", "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\n", Options{}, []string{"generateName is not enough"}},
		{"scalar", "just a string\n", Options{}, []string{"document 1", "not a Kubernetes object (a string"}},
		{"list item without name", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret}\n",
			Options{}, []string{"document 1, item 2", "Secret has no metadata.name"}},
		{"Karmada without --from-karmada", "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\n", Options{},
			[]string{"Karmada object", "--from-karmada"}},
		{"same object twice", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n",
			Options{}, []string{"bad.yaml, document 2", "would be ResourceTemplate default/a", "document 1"}},
		{"JSON syntax", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}} {"apiVersion": `, Options{},
			[]string{"bad.yaml, document 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Wrap([]Input{{Name: "bad.yaml", Data: []byte(c.data)}}, c.opts)
			if err == nil {
				t.Fatalf("no error; output %v", res.Objects)
			}
			if res != nil {
				t.Errorf("a result with an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// Errors in several files are all reported.
	_, err := Wrap([]Input{{Name: "a.yaml", Data: []byte("kind: X\n")}, {Name: "b.yaml", Data: []byte("apiVersion: v1\n")}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "a.yaml") || !strings.Contains(err.Error(), "b.yaml") {
		t.Errorf("error %v does not name both files", err)
	}
}

func TestScope(t *testing.T) {
	const in = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: letsencrypt}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g, namespace: stray}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast, namespace: oops}
provisioner: example.com/fast
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2}
`
	kinds := func(res *Result) []string {
		var out []string
		for _, o := range res.Objects {
			out = append(out, o.GetKind()+" "+describeName(o.GetNamespace(), o.GetName()))
		}
		return out
	}
	res, err := Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ResourceTemplate default/w", "ClusterResourceTemplate letsencrypt", "ResourceTemplate stray/g",
		"ClusterResourceTemplate fast", "ResourceTemplate default/w2"}
	if got := kinds(res); !reflect.DeepEqual(got, want) {
		t.Errorf("built-in scope: %v, want %v", got, want)
	}
	notes := strings.Join(res.Notes, "\n")
	if strings.Count(notes, "Widget.example.com: scope unknown, assumed namespaced") != 1 || !strings.Contains(notes, "--cluster-scoped-kind Widget.example.com") {
		t.Errorf("want one note per unknown kind naming the flag:\n%s", notes)
	}
	if !strings.Contains(notes, `StorageClass fast: cluster-scoped, metadata.namespace "oops" removed`) {
		t.Errorf("no note for the removed namespace:\n%s", notes)
	}
	if m := res.Objects[3].Object["spec"].(map[string]any)["manifest"].(map[string]any); m["metadata"].(map[string]any)["namespace"] != nil {
		t.Errorf("namespace kept in a ClusterResourceTemplate's manifest: %v", m)
	}

	// --cluster-scoped-kind beats discovery, discovery beats the tables.
	discovery := func(gvk schema.GroupVersionKind) (bool, bool) {
		switch gvk.Kind {
		case "Gadget":
			return false, true
		case "ClusterIssuer":
			return true, true // a (made up) cluster that disagrees with the table
		}
		return false, false
	}
	res, err = Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{Namespace: "apps", Scope: discovery,
		ClusterScopedKinds: ParseClusterScopedKinds([]string{"Widget.example.com", "ClusterIssuer.cert-manager.io"})})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"ClusterResourceTemplate w", "ClusterResourceTemplate letsencrypt", "ClusterResourceTemplate g",
		"ClusterResourceTemplate fast", "ClusterResourceTemplate w2"}
	if got := kinds(res); !reflect.DeepEqual(got, want) {
		t.Errorf("with flags and discovery: %v, want %v", got, want)
	}
	if strings.Contains(strings.Join(res.Notes, "\n"), "scope unknown") {
		t.Errorf("notes about unknown scope although every kind is known: %v", res.Notes)
	}
}

func TestStrip(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "uid": "u", "resourceVersion": "1", "generation": int64(2),
			"creationTimestamp": nil, "selfLink": "/x", "managedFields": []any{},
			"annotations": map[string]any{AnnotationLastApplied: "{}"}, "labels": map[string]any{"k": "v"},
			"ownerReferences": []any{map[string]any{"name": "o"}}},
		"data": map[string]any{"k": "v"}, "status": map[string]any{"x": "y"},
	}}
	Strip(obj)
	want := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"k": "v"}},
		"data":     map[string]any{"k": "v"}}
	if !reflect.DeepEqual(obj.Object, want) {
		t.Errorf("stripped: %v", obj.Object)
	}
	for _, tt := range []struct {
		clusterIP string
		kept      bool
	}{{"10.96.0.10", false}, {"None", true}} {
		svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s"},
			"spec": map[string]any{"clusterIP": tt.clusterIP, "clusterIPs": []any{tt.clusterIP}, "ports": []any{map[string]any{"port": int64(80)}}}}}
		Strip(svc)
		_, kept := svc.Object["spec"].(map[string]any)["clusterIP"]
		if kept != tt.kept {
			t.Errorf("Service clusterIP %s kept=%v, want %v", tt.clusterIP, kept, tt.kept)
		}
	}
}

// Flotilla objects pass through byte for byte in meaning, even next to
// objects that are wrapped, and are not renamed or namespaced.
func TestWrapPassesFlotillaObjectsThrough(t *testing.T) {
	const in = `apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Service, name: web}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
`
	res, err := Wrap([]Input{{Name: "in", Data: []byte(in)}}, Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 2 || res.Objects[0].GetNamespace() != "" || res.Objects[0].GetKind() != "PropagationPolicy" ||
		res.Objects[1].GetKind() != KindResourceTemplate || res.Objects[1].GetName() != "web" || res.Objects[1].GetNamespace() != "shop" {
		t.Errorf("got %v", res.Objects)
	}
}
