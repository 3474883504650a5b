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
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func configMap(data map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "cm", "namespace": "default"},
		"data":     data,
	}}
}

func jsonOp(operator policyv1alpha1.OverriderOperator, subPath, value string) policyv1alpha1.JSONPatchOperation {
	o := policyv1alpha1.JSONPatchOperation{SubPath: subPath, Operator: operator}
	if value != "" {
		o.Value = apiextensionsv1.JSON{Raw: []byte(value)}
	}
	return o
}

func yamlOp(operator policyv1alpha1.OverriderOperator, subPath, value string) policyv1alpha1.YAMLPatchOperation {
	o := policyv1alpha1.YAMLPatchOperation{SubPath: subPath, Operator: operator}
	if value != "" {
		o.Value = apiextensionsv1.JSON{Raw: []byte(value)}
	}
	return o
}

// applyFieldOverriders runs fieldOverriders as one OverridePolicy on obj.
func applyFieldOverriders(obj *unstructured.Unstructured, fos ...policyv1alpha1.FieldOverrider) (*AppliedOverrides, error) {
	p := op("default", "fo", rule(policyv1alpha1.Overriders{FieldOverrider: fos}))
	return Apply(obj, cluster("m1"), nil, []*policyv1alpha1.OverridePolicy{p})
}

func dataOf(t *testing.T, obj *unstructured.Unstructured, key string) string {
	t.Helper()
	s, ok, err := unstructured.NestedString(obj.Object, "data", key)
	if !ok || err != nil {
		t.Fatalf("data[%q]: %v %v", key, ok, err)
	}
	return s
}

// Karmada: test/e2e/suites/base/overridepolicy_test.go, Context("[FieldOverrider]
// apply field overrider testing to update JSON values in ConfigMap").
func TestFieldOverriderKarmadaJSON(t *testing.T) {
	deploy := `{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "nginx-deploy", "namespace": "default"},
  "spec": {
    "replicas": 3,
    "selector": {"matchLabels": {"app": "nginx"}},
    "template": {
      "metadata": {"labels": {"app": "nginx"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.19.0"}]}
    }
  }
}`
	obj := configMap(map[string]interface{}{"deploy.json": deploy})
	res, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/deploy.json", JSON: []policyv1alpha1.JSONPatchOperation{
		jsonOp(policyv1alpha1.OverriderOpReplace, "/spec/replicas", `5`),
		jsonOp(policyv1alpha1.OverriderOpAdd, "/spec/template/spec/containers/-", `{"name": "nginx-helper", "image": "nginx:1.19.1"}`),
		jsonOp(policyv1alpha1.OverriderOpRemove, "/spec/template/spec/containers/0/image", ""),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := dataOf(t, obj, "deploy.json")
	// Karmada's e2e assertions: compact JSON with the new values.
	for _, want := range []string{`"replicas":5`, `"name":"nginx-helper"`} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
	if strings.Contains(got, `"image":"nginx:1.19.0"`) {
		t.Errorf("%s still has the removed image", got)
	}
	// The document's key order is kept.
	if !strings.HasPrefix(got, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":`) {
		t.Errorf("key order lost: %s", got)
	}
	if res == nil || len(res.OverridePolicies) != 1 || len(res.OverridePolicies[0].Overriders.FieldOverrider) != 1 {
		t.Errorf("not recorded: %+v", res)
	}
}

const karmadaNginxYAML = `
server:
  listen: 80
  server_name: localhost
  location /:
    root: /usr/share/nginx/html
    index: 
      - index.html
      - index.htm
  error_page:
    - code: 500
    - code: 502
    - code: 503
    - code: 504
  location /50x.html:
    root: /usr/share/nginx/html
`

// Karmada: overridepolicy_test.go, Context("[FieldOverrider] apply field
// overrider testing to update YAML values in ConfigMap"): "~1" is a "/"
// in a key.
func TestFieldOverriderKarmadaYAML(t *testing.T) {
	obj := configMap(map[string]interface{}{"nginx.yaml": karmadaNginxYAML})
	if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/nginx.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
		yamlOp(policyv1alpha1.OverriderOpReplace, "/server/location ~1/root", `"/var/www/html"`),
		yamlOp(policyv1alpha1.OverriderOpAdd, "/server/error_page/-", `{"code": 400}`),
		yamlOp(policyv1alpha1.OverriderOpRemove, "/server/location ~1/index", ""),
	}}); err != nil {
		t.Fatal(err)
	}
	got := dataOf(t, obj, "nginx.yaml")
	want := `server:
  listen: 80
  server_name: localhost
  location /:
    root: /var/www/html
  error_page:
    - code: 500
    - code: 502
    - code: 503
    - code: 504
    - code: 400
  location /50x.html:
    root: /usr/share/nginx/html
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Karmada's user guide (override-policy.md, FieldOverrider, example 1) and
// the structured-configuration proposal's example. The guide writes
// value: "3306", a string, so the port becomes the string "3306" (quoted
// in YAML); the guide's output shows a number, which Karmada does not
// produce either (its JSONToYAML quotes it too). value: 3306 gives the
// number.
func TestFieldOverriderKarmadaDocs(t *testing.T) {
	obj := configMap(map[string]interface{}{"config.yaml": "app:\n  database:\n    port: 5432\n"})
	if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/config.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
		yamlOp(policyv1alpha1.OverriderOpReplace, "/app/database/port", `"3306"`)}}); err != nil {
		t.Fatal(err)
	}
	if got := dataOf(t, obj, "config.yaml"); got != "app:\n  database:\n    port: \"3306\"\n" {
		t.Errorf("user guide: %q", got)
	}
	obj = configMap(map[string]interface{}{"db-config.yaml": "database:\n  host: localhost\n  port: 3306\n"})
	if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/db-config.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
		yamlOp(policyv1alpha1.OverriderOpReplace, "/database/host", `"remote-db.example.com"`),
		yamlOp(policyv1alpha1.OverriderOpReplace, "/database/port", `3307`)}}); err != nil {
		t.Fatal(err)
	}
	if got := dataOf(t, obj, "db-config.yaml"); got != "database:\n  host: remote-db.example.com\n  port: 3307\n" {
		t.Errorf("proposal: %q", got)
	}
}

// What YAML has and JSON lacks: anchors and merge keys are expanded (the
// proposal's example), comments go, YAML 1.1 booleans and other strings
// that would read as another type stay strings (quoted), multi-line
// strings stay multi-line, timestamps stay text.
func TestFieldOverriderYAMLConversion(t *testing.T) {
	in := `# people
default: &default
  name: Alice
  age: 30
employee1:
  <<: *default
  role: Developer
employee2:
  role: Designer
  <<: *default
  age: 31 # overrides the merged age
flags: {enabled: yes, legacy: off, count: "7", ratio: 0.5, big: 0x10}
when: 2001-12-14
script: |
  echo a
  echo b
`
	obj := configMap(map[string]interface{}{"c.yaml": in})
	if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/c.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
		yamlOp(policyv1alpha1.OverriderOpAdd, "/added", `"x"`)}}); err != nil {
		t.Fatal(err)
	}
	want := `default:
  name: Alice
  age: 30
employee1:
  name: Alice
  age: 30
  role: Developer
employee2:
  role: Designer
  name: Alice
  age: 31
flags:
  enabled: "yes"
  legacy: "off"
  count: "7"
  ratio: 0.5
  big: 16
when: "2001-12-14"
script: |
  echo a
  echo b
added: x
`
	if got := dataOf(t, obj, "c.yaml"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A top-level sequence, "" (the whole document) and "-" work as in JSON
// patch.
func TestFieldOverriderRootAndLists(t *testing.T) {
	obj := configMap(map[string]interface{}{"l.yaml": "- a\n- b\n", "l.json": ` [1, 2] `})
	if _, err := applyFieldOverriders(obj,
		policyv1alpha1.FieldOverrider{FieldPath: "/data/l.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpAdd, "/-", `"c"`), yamlOp(policyv1alpha1.OverriderOpRemove, "/0", "")}},
		policyv1alpha1.FieldOverrider{FieldPath: "/data/l.json", JSON: []policyv1alpha1.JSONPatchOperation{
			jsonOp(policyv1alpha1.OverriderOpReplace, "", `{"a": "<b>"}`)}},
	); err != nil {
		t.Fatal(err)
	}
	if got := dataOf(t, obj, "l.yaml"); got != "- b\n- c\n" {
		t.Errorf("yaml list: %q", got)
	}
	if got := dataOf(t, obj, "l.json"); got != `{"a":"<b>"}` {
		t.Errorf("json root: %q", got)
	}
}

// Every failure names the policy, the fieldOverrider and what is wrong,
// and leaves the object unchanged.
func TestFieldOverriderErrors(t *testing.T) {
	big := strings.Repeat("a", MaxFieldDocumentBytes+1)
	deep := strings.Repeat("[", MaxFieldDepth+1) + strings.Repeat("]", MaxFieldDepth+1)
	laughs := "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", ")
		laughs += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, refs)
	}
	// One anchor of 100 KiB, aliased 10,000 times: small for go-yaml's
	// alias ratio check (few aliases), 1 GB once expanded.
	wide := "s: &s " + strings.Repeat("x", 100<<10) + "\nl: [" + strings.TrimSuffix(strings.Repeat("*s,", 10000), ",") + "]\n"
	replace := func(v string) []policyv1alpha1.YAMLPatchOperation {
		return []policyv1alpha1.YAMLPatchOperation{yamlOp(policyv1alpha1.OverriderOpReplace, "/a", v)}
	}
	jsonReplace := []policyv1alpha1.JSONPatchOperation{jsonOp(policyv1alpha1.OverriderOpReplace, "/a", `1`)}
	data := map[string]interface{}{
		"ok.yaml": "a: 1\n", "ok.json": `{"a": 1}`, "bad.yaml": "a: [1\n", "bad.json": `{"a": 1`, "multi.yaml": "a: 1\n---\na: 2\n",
		"scalar.yaml": "just text", "scalar.json": `"text"`, "empty": "", "comment.yaml": "# nothing\n",
		"big": big, "deep.yaml": deep, "deep.json": deep, "laughs.yaml": laughs, "wide.yaml": wide,
		"dup.yaml": "a: 1\na: 2\n", "inf.yaml": "a: .inf\n", "mapkey.yaml": "? [x]\n: 1\n", "badmerge.yaml": "<<: 1\na: 1\n",
		"cycle.yaml": "a: &a [*a]\n", "number": int64(3),
	}
	cases := []struct {
		name string
		f    policyv1alpha1.FieldOverrider
		want string
	}{
		{"field missing", policyv1alpha1.FieldOverrider{FieldPath: "/data/nope", YAML: replace("1")}, `no field "nope"`},
		{"not a string", policyv1alpha1.FieldOverrider{FieldPath: "/data/number", YAML: replace("1")}, "not a string"},
		{"not a pointer", policyv1alpha1.FieldOverrider{FieldPath: "data/ok.yaml", YAML: replace("1")}, "must start with /"},
		{"both", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml", YAML: replace("1"), JSON: jsonReplace}, "both json and yaml"},
		{"neither", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml"}, "neither json nor yaml"},
		{"value missing", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpAdd, "/b", "")}}, "value is required"},
		{"bad subPath", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpAdd, "b", "1")}}, "must be empty or start with /"},
		{"subPath missing", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpReplace, "/x/y", "1")}}, "/x/y"},
		{"unparsable YAML", policyv1alpha1.FieldOverrider{FieldPath: "/data/bad.yaml", YAML: replace("1")}, "not YAML"},
		{"unparsable JSON", policyv1alpha1.FieldOverrider{FieldPath: "/data/bad.json", JSON: jsonReplace}, "not JSON"},
		{"YAML read as JSON", policyv1alpha1.FieldOverrider{FieldPath: "/data/ok.yaml", JSON: jsonReplace}, "not JSON"},
		{"two documents", policyv1alpha1.FieldOverrider{FieldPath: "/data/multi.yaml", YAML: replace("1")}, "more than one YAML document"},
		{"scalar YAML", policyv1alpha1.FieldOverrider{FieldPath: "/data/scalar.yaml", YAML: replace("1")}, "scalar, not a mapping"},
		{"scalar JSON", policyv1alpha1.FieldOverrider{FieldPath: "/data/scalar.json", JSON: jsonReplace}, "a string, not an object"},
		{"empty YAML", policyv1alpha1.FieldOverrider{FieldPath: "/data/empty", YAML: replace("1")}, "no YAML document"},
		{"comment only", policyv1alpha1.FieldOverrider{FieldPath: "/data/comment.yaml", YAML: replace("1")}, "no YAML document"},
		{"empty JSON", policyv1alpha1.FieldOverrider{FieldPath: "/data/empty", JSON: jsonReplace}, "empty"},
		{"too large", policyv1alpha1.FieldOverrider{FieldPath: "/data/big", YAML: replace("1")}, "more than 262144"},
		{"too deep YAML", policyv1alpha1.FieldOverrider{FieldPath: "/data/deep.yaml", YAML: replace("1")}, "nested more than"},
		{"too deep JSON", policyv1alpha1.FieldOverrider{FieldPath: "/data/deep.json", JSON: jsonReplace}, "nested more than"},
		{"billion laughs", policyv1alpha1.FieldOverrider{FieldPath: "/data/laughs.yaml", YAML: replace("1")}, "expands to more than"},
		{"wide alias", policyv1alpha1.FieldOverrider{FieldPath: "/data/wide.yaml", YAML: replace("1")}, "expands to more than"},
		{"alias cycle", policyv1alpha1.FieldOverrider{FieldPath: "/data/cycle.yaml", YAML: replace("1")}, "nested more than"},
		{"repeated key", policyv1alpha1.FieldOverrider{FieldPath: "/data/dup.yaml", YAML: replace("1")}, `mapping key "a" repeated`},
		{"infinity", policyv1alpha1.FieldOverrider{FieldPath: "/data/inf.yaml", YAML: replace("1")}, "no JSON form"},
		{"sequence as key", policyv1alpha1.FieldOverrider{FieldPath: "/data/mapkey.yaml", YAML: replace("1")}, "not a scalar"},
		{"merge of a scalar", policyv1alpha1.FieldOverrider{FieldPath: "/data/badmerge.yaml", YAML: replace("1")}, "merge key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := configMap(data)
			orig := obj.DeepCopy()
			start := time.Now()
			res, err := applyFieldOverriders(obj, tc.f)
			elapsed := time.Since(start)
			if err == nil {
				t.Fatalf("no error; data %v", obj.Object["data"])
			}
			for _, w := range []string{"OverridePolicy default/fo", "fieldOverrider", tc.f.FieldPath, tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			if res != nil || !reflect.DeepEqual(obj, orig) {
				t.Errorf("object changed on error")
			}
			t.Logf("%v: %s", elapsed.Round(time.Millisecond), err)
		})
	}
}

// Several fieldOverriders run in order after the other overriders and
// before plaintext, on the rendered object.
func TestFieldOverriderOrder(t *testing.T) {
	obj := configMap(map[string]interface{}{"c.yaml": "a: 1\n"})
	p := op("default", "fo", rule(policyv1alpha1.Overriders{
		Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/data/c.yaml", Operator: policyv1alpha1.OverriderOpReplace,
			Value: apiextensionsv1.JSON{Raw: []byte(`"plaintext wins"`)}}},
		FieldOverrider: []policyv1alpha1.FieldOverrider{
			{FieldPath: "/data/c.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{yamlOp(policyv1alpha1.OverriderOpReplace, "/a", `2`)}},
			{FieldPath: "/data/c.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{yamlOp(policyv1alpha1.OverriderOpAdd, "/b", `3`)}},
		},
	}))
	res, err := Apply(obj, cluster("m1"), nil, []*policyv1alpha1.OverridePolicy{p})
	if err != nil {
		t.Fatal(err)
	}
	if got := dataOf(t, obj, "c.yaml"); got != "plaintext wins" {
		t.Errorf("plaintext did not run last: %q", got)
	}
	if n := len(res.OverridePolicies[0].Overriders.FieldOverrider); n != 2 {
		t.Errorf("%d fieldOverriders recorded", n)
	}
	// Without the plaintext overrider both fieldOverriders apply in order.
	p.Spec.OverrideRules[0].Overriders.Plaintext = nil
	obj = configMap(map[string]interface{}{"c.yaml": "a: 1\n"})
	if _, err := Apply(obj, cluster("m1"), nil, []*policyv1alpha1.OverridePolicy{p}); err != nil {
		t.Fatal(err)
	}
	if got := dataOf(t, obj, "c.yaml"); got != "a: 2\nb: 3\n" {
		t.Errorf("got %q", got)
	}
}

var fieldSeed = flag.Int64("fieldoverrider-seed", 0, "replay TestFieldOverriderRoundTrip with this seed (0: a new one)")

// randomValue is a JSON value (as sigs.k8s.io/yaml decodes it) of random
// shape: strings chosen to look like other YAML types, numbers, booleans,
// nulls, nested maps and lists.
func randomValue(r *rand.Rand, depth int) interface{} {
	strs := []string{"yes", "no", "on", "off", "~", "null", "true", "1", "1.5", "0x1F", "1e3", "2001-12-14", "-", "- a", "a: b",
		"#x", "&a", "*a", "!t", "<<", "=", "1_000", "1:20", "0b11", "0o17", ".5", "+1", "Null", "", " lead", "trail ", "multi\nline", "tab\t", "quote\"", "back\\slash", "ünïcödé", "{}", "[]", "@", "%"}
	n := r.Intn(9)
	if depth > 4 {
		n = r.Intn(5)
	}
	switch n {
	case 0:
		return strs[r.Intn(len(strs))]
	case 1:
		return float64(r.Intn(2000) - 1000)
	case 2:
		return float64(r.Intn(1000)) / 8
	case 3:
		return r.Intn(2) == 0
	case 4:
		return nil
	case 5, 6:
		m := map[string]interface{}{}
		for range r.Intn(5) {
			// sigs.k8s.io/yaml writes a "<<" key unquoted, which any
			// reader takes for a merge key.
			if k := strs[r.Intn(len(strs))]; k != "<<" {
				m[k] = randomValue(r, depth+1)
			}
		}
		return m
	default:
		l := []interface{}{}
		for range r.Intn(5) {
			l = append(l, randomValue(r, depth+1))
		}
		return l
	}
}

// Property: a YAML document survives the conversion with its data intact
// (read back by sigs.k8s.io/yaml, Karmada's reader, it equals the input
// plus the added key), over seeded random documents.
func TestFieldOverriderRoundTrip(t *testing.T) {
	seed := *fieldSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test ./pkg/overrides -run TestFieldOverriderRoundTrip -fieldoverrider-seed=%d)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	for i := range 300 {
		doc := map[string]interface{}{}
		for range 1 + r.Intn(6) {
			doc[fmt.Sprintf("k%d", r.Intn(20))] = randomValue(r, 1)
		}
		in, err := sigsyaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		obj := configMap(map[string]interface{}{"c.yaml": string(in)})
		if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/c.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpAdd, "/added", `{"v": "yes"}`)}}); err != nil {
			t.Fatalf("case %d (seed %d): %v\n%s", i, seed, err, in)
		}
		out := dataOf(t, obj, "c.yaml")
		var got map[string]interface{}
		if err := sigsyaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("case %d (seed %d): output does not parse: %v\n%s", i, seed, err, out)
		}
		doc["added"] = map[string]interface{}{"v": "yes"}
		// Compare as JSON: the reader's number types do not matter.
		wantJSON, _ := json.Marshal(doc)
		gotJSON, _ := json.Marshal(got)
		if string(wantJSON) != string(gotJSON) {
			t.Fatalf("case %d (seed %d):\ninput\n%s\noutput\n%s\nwant %s\ngot  %s", i, seed, in, out, wantJSON, gotJSON)
		}
	}
}

// FuzzFieldOverrider: no document or operation makes the applier panic or
// exceed its bounds; a success writes a document that parses again.
func FuzzFieldOverrider(f *testing.F) {
	f.Add(karmadaNginxYAML, true, "replace", "/server/location ~1/root", []byte(`"/var/www/html"`))
	f.Add("a: &a [x, *a]\n", true, "add", "/b", []byte(`1`))
	f.Add("d: &d {x: 1}\ne:\n  <<: [*d, {y: 2}]\n", true, "remove", "/e/x", []byte(nil))
	f.Add("- a\n- b\n", true, "add", "/-", []byte(`{"k": [1, 2]}`))
	f.Add("? a\n: 1\n!!binary x: !!timestamp 2001-01-01\n", true, "replace", "", []byte(`[1]`))
	f.Add(`{"a": [1, {"b": null}]}`, false, "add", "/a/1/c", []byte(`"<x>"`))
	f.Add(`[1, 2, 3]`, false, "remove", "/-1", []byte(nil))
	f.Add("a: 1\n---\nb: 2\n", true, "add", "/c", []byte(`1`))
	f.Add("%YAML 1.1\n---\na: !foo bar\n", true, "move", "/a", []byte(`1`))
	f.Fuzz(func(t *testing.T, doc string, isYAML bool, operator, subPath string, value []byte) {
		fo := policyv1alpha1.FieldOverrider{FieldPath: "/data/doc"}
		if isYAML {
			fo.YAML = []policyv1alpha1.YAMLPatchOperation{{SubPath: subPath, Operator: policyv1alpha1.OverriderOperator(operator), Value: apiextensionsv1.JSON{Raw: value}}}
		} else {
			fo.JSON = []policyv1alpha1.JSONPatchOperation{{SubPath: subPath, Operator: policyv1alpha1.OverriderOperator(operator), Value: apiextensionsv1.JSON{Raw: value}}}
		}
		obj := configMap(map[string]interface{}{"doc": doc})
		if _, err := applyFieldOverriders(obj, fo); err != nil {
			if obj.Object["data"].(map[string]interface{})["doc"] != doc {
				t.Errorf("object changed on error")
			}
			return
		}
		out := dataOf(t, obj, "doc")
		if len(out) > MaxFieldExpandedBytes {
			t.Errorf("output of %d bytes", len(out))
		}
		var v interface{}
		if isYAML {
			if err := sigsyaml.Unmarshal([]byte(out), &v); err != nil {
				t.Errorf("output is not YAML: %v\n%s", err, out)
			}
		} else if !json.Valid([]byte(out)) {
			t.Errorf("output is not JSON: %s", out)
		}
	})
}

// Long top-level mappings and lists are written in groups (go-yaml's
// emitter keeps a stream's events); the groups read back as one document.
func TestFieldOverriderLongDocuments(t *testing.T) {
	m := map[string]interface{}{}
	l := []interface{}{}
	for i := range 200 {
		m[fmt.Sprintf("k%03d", i)] = map[string]interface{}{"v": float64(i), "s": "yes"}
		l = append(l, []interface{}{float64(i), "on"})
	}
	for name, doc := range map[string]interface{}{"mapping": m, "list": l} {
		in, err := sigsyaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		obj := configMap(map[string]interface{}{"c.yaml": string(in)})
		first := "/0"
		if name == "mapping" {
			first = "/k000"
		}
		if _, err := applyFieldOverriders(obj, policyv1alpha1.FieldOverrider{FieldPath: "/data/c.yaml", YAML: []policyv1alpha1.YAMLPatchOperation{
			yamlOp(policyv1alpha1.OverriderOpRemove, first, "")}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "mapping" {
			delete(m, "k000")
		} else {
			l = l[1:]
		}
		var got interface{}
		if err := sigsyaml.Unmarshal([]byte(dataOf(t, obj, "c.yaml")), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := interface{}(m)
		if name == "list" {
			want = l
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if string(wantJSON) != string(gotJSON) {
			t.Errorf("%s: got %s\nwant %s", name, gotJSON, wantJSON)
		}
		if strings.Contains(dataOf(t, obj, "c.yaml"), "---") {
			t.Errorf("%s: written as several documents", name)
		}
	}
}
