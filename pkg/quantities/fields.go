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

package quantities

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Fields are the places a Go type keeps resource quantities, found once by
// reflection over its JSON fields: converting an unstructured object into
// that type (runtime.DefaultUnstructuredConverter.FromUnstructured) parses
// exactly these, so checking them first (Check) bounds the conversion. A
// field Kubernetes adds to the type is covered with the next dependency
// update, without a list to keep.
type Fields struct {
	root *node
}

// node is one place in the type that has quantities at or below it.
type node struct {
	quantity bool    // the value here is a Quantity
	fields   []child // a struct's fields with quantities below them, in declaration order
	elem     *node   // a list's elements or a map's values
	isMap    bool    // elem is a map's values (else a list's elements)
}

type child struct {
	name string
	node *node
}

// PodSpec and PodTemplateSpec are the quantities of corev1.PodSpec and
// corev1.PodTemplateSpec: requests, limits and overhead, pod-level
// resources, emptyDir size limits, downward API divisors, ephemeral
// volume claim templates.
var (
	PodSpec         = FieldsOf(corev1.PodSpec{})
	PodTemplateSpec = FieldsOf(corev1.PodTemplateSpec{})
)

var quantityType = reflect.TypeOf(resource.Quantity{})

// FieldsOf derives the Fields of v's type.
func FieldsOf(v any) *Fields {
	return &Fields{root: build(reflect.TypeOf(v), map[reflect.Type]bool{})}
}

// build returns the node of t, nil when t holds no quantity. visiting
// guards against recursive types: a type met again below itself is taken
// to add nothing (no Kubernetes workload type is recursive).
func build(t reflect.Type, visiting map[reflect.Type]bool) *node {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == quantityType {
		return &node{quantity: true}
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if e := build(t.Elem(), visiting); e != nil {
			return &node{elem: e}
		}
	case reflect.Map:
		if e := build(t.Elem(), visiting); e != nil {
			return &node{elem: e, isMap: true}
		}
	case reflect.Struct:
		if visiting[t] {
			return nil
		}
		visiting[t] = true
		defer delete(visiting, t)
		n := &node{}
		addFields(n, t, visiting)
		if len(n.fields) > 0 {
			return n
		}
	}
	return nil
}

// addFields adds t's fields to n, those of inlined (embedded) structs
// in place, as encoding/json and the unstructured converter read them.
func addFields(n *node, t reflect.Type, visiting map[reflect.Type]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && f.Anonymous {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != quantityType {
				addFields(n, ft, visiting)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if c := build(f.Type, visiting); c != nil {
			n.fields = append(n.fields, child{name: name, node: c})
		}
	}
}

// Paths lists the quantity paths, e.g. "containers[].resources.requests.*"
// ("[]" any list element, "*" any map value), sorted.
func (f *Fields) Paths() []string {
	var out []string
	var walk func(n *node, p string)
	walk = func(n *node, p string) {
		switch {
		case n == nil:
		case n.quantity:
			out = append(out, p)
		case n.elem != nil && n.isMap:
			walk(n.elem, p+".*")
		case n.elem != nil:
			walk(n.elem, p+"[]")
		default:
			for _, c := range n.fields {
				walk(c.node, p+"."+c.name)
			}
		}
	}
	walk(f.root, "")
	for i := range out {
		out[i] = strings.TrimPrefix(out[i], ".")
	}
	sort.Strings(out)
	return out
}

// Check bounds every quantity of obj (an unstructured object of the
// type, e.g. a pod spec's map) by Parse, as the converter would read it
// (a string trimmed of spaces, as Quantity.UnmarshalJSON does; a number
// as its JSON text). It returns the first refused one, in field order
// and, within a map, by key, as an *Error whose Path is path (the
// object's own path, e.g. "spec.template.spec"; may be empty) joined to
// the field's. Values of the wrong JSON type are left to the conversion,
// which refuses them.
func (f *Fields) Check(obj map[string]any, path string) error {
	if f.root == nil || obj == nil {
		return nil
	}
	w := walker{root: path, path: make([]pathElem, 0, 16)}
	return w.check(obj, f.root)
}

// walker walks an object over Fields. path is the way to the value being
// checked, kept as a stack and made into a string only for an error, so
// that a walk over valid quantities allocates once.
type walker struct {
	root string
	path []pathElem
}

// pathElem is a field or map key (name), or a list index (name "").
type pathElem struct {
	name  string
	index int
}

func (w *walker) pathString() string {
	var b strings.Builder
	b.WriteString(w.root)
	for _, e := range w.path {
		switch {
		case e.name == "":
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case b.Len() == 0:
			b.WriteString(e.name)
		default:
			b.WriteString("." + e.name)
		}
	}
	return b.String()
}

// at checks v at n one step further down the path.
func (w *walker) at(e pathElem, v any, n *node) error {
	w.path = append(w.path, e)
	err := w.check(v, n)
	w.path = w.path[:len(w.path)-1]
	return err
}

func (w *walker) check(v any, n *node) error {
	switch {
	case n.quantity:
		if err := checkValue(v); err != nil {
			err.Path = w.pathString()
			return err
		}
	case n.elem != nil && n.isMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		// The first error by key, so the message is the same on every
		// sync (map order is random) without sorting when all is well.
		var first error
		var firstKey string
		for k, e := range m {
			if first != nil && k >= firstKey {
				continue
			}
			if err := w.at(pathElem{name: pathKey(k)}, e, n.elem); err != nil {
				first, firstKey = err, k
			}
		}
		return first
	case n.elem != nil:
		l, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range l {
			if err := w.at(pathElem{index: i}, e, n.elem); err != nil {
				return err
			}
		}
	default:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, c := range n.fields {
			if cv, found := m[c.name]; found {
				if err := w.at(pathElem{name: c.name}, cv, c.node); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// pathKey is a map key as shown in a path: a tenant's key may be of any
// length, so one longer than MaxLength bytes is cut (on a character
// boundary) and marked.
func pathKey(k string) string {
	if len(k) <= MaxLength {
		return k
	}
	cut := 0
	for i := range k {
		if i > MaxLength {
			break
		}
		cut = i
	}
	return k[:cut] + "…"
}

// checkValue bounds one value at a quantity's place; the error has no
// Path.
func checkValue(v any) *Error {
	var s string
	switch t := v.(type) {
	case string:
		s = strings.TrimSpace(t)
	case json.Number:
		s = string(t)
	case int64, int32, int, float64, float32:
		// The converter hands a number to Quantity.UnmarshalJSON as its
		// JSON text ("1e-07" for 0.0000001).
		b, err := json.Marshal(t)
		if err != nil {
			return nil // NaN or Inf: the conversion refuses it
		}
		s = string(b)
	default:
		return nil
	}
	if _, err := Parse(s); err != nil {
		return err.(*Error)
	}
	return nil
}
