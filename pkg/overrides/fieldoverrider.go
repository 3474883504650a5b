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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// A fieldOverrider (Karmada's FieldOverrider) parses a JSON or YAML
// document held in a string field of the template, applies JSON-patch
// operations to it and writes it back. Both the document (the tenant's
// template) and the operations (the tenant's policy) are untrusted, and the
// hub renders every binding for every cluster, so everything is bounded
// where it enters:
//
//   - the field holds at most MaxFieldDocumentBytes;
//   - a document is nested at most MaxFieldDepth levels, an alias counting
//     as one more level (so an alias cycle is refused, never followed);
//   - YAML aliases and merge keys are expanded by Flotilla's own walk, which
//     stops once the expansion passes MaxFieldExpandedBytes of JSON or
//     maxFieldSteps nodes: a "billion laughs" document costs at most that
//     much work and memory, however its anchors nest (go-yaml's own alias
//     ratio check still allows about 100 MB of allocations);
//   - a fieldOverrider has at most maxFieldOps operations (the CRD allows
//     64) and the result is at most MaxFieldExpandedBytes.
//
// A YAML document is read with go-yaml v3 (YAML 1.2: `yes` stays a
// string), converted to JSON in document order, patched, and written back
// as block YAML with two-space indentation in the same key order. What YAML
// has and JSON has not is lost on the way, as in Karmada (which converts
// through sigs.k8s.io/yaml): comments, anchors and aliases (expanded),
// merge keys (merged), tags other than the core schema's (the value is
// kept as a string), the styles of scalars (a string is quoted only where
// YAML needs it), and the difference between 1.0 and 1. A JSON document is
// written back compact, in its key order.

// Bounds of a fieldOverrider's document.
const (
	// MaxFieldDocumentBytes bounds the string a fieldOverrider parses.
	// Not the 1 MiB a ConfigMap can hold: a document is parsed and written
	// again for each cluster a template renders for, and a 900 KiB YAML
	// document cost 0.41 s and 287 MiB allocated per render; at 256 KiB a
	// tenant's document costs a quarter of that, and config files this
	// large are rare.
	MaxFieldDocumentBytes = 256 << 10
	// MaxFieldExpandedBytes bounds the document's JSON form, YAML aliases
	// expanded, and the patched result (a billion-laughs document is
	// refused once it passes this).
	MaxFieldExpandedBytes = 1 << 20
	// MaxFieldDepth bounds the nesting of a document (an alias counts one
	// level more than its anchor).
	MaxFieldDepth = 128
	// maxFieldOps bounds the operations of one fieldOverrider.
	maxFieldOps = 128
	// maxFieldSteps bounds the YAML nodes (and mapping entries) visited
	// while expanding aliases and merge keys.
	maxFieldSteps = 1 << 20
)

// fieldOverriderName is how errors name a fieldOverrider.
func fieldOverriderName(f *policyv1alpha1.FieldOverrider) string {
	format := "json"
	if len(f.YAML) > 0 {
		format = "yaml"
	}
	return fmt.Sprintf("%s %s", format, f.FieldPath)
}

// applyField applies one fieldOverrider to doc in place.
func applyField(doc map[string]interface{}, f *policyv1alpha1.FieldOverrider) error {
	hasJSON, hasYAML := len(f.JSON) > 0, len(f.YAML) > 0
	switch {
	case hasJSON && hasYAML:
		return errors.New("sets both json and yaml: set exactly one")
	case !hasJSON && !hasYAML:
		return errors.New("sets neither json nor yaml: set exactly one")
	}
	var ops []jsonPatchOp
	var err error
	if hasJSON {
		ops, err = fieldOps(f.JSON, func(o policyv1alpha1.JSONPatchOperation) (string, policyv1alpha1.OverriderOperator, []byte) {
			return o.SubPath, o.Operator, o.Value.Raw
		})
	} else {
		ops, err = fieldOps(f.YAML, func(o policyv1alpha1.YAMLPatchOperation) (string, policyv1alpha1.OverriderOperator, []byte) {
			return o.SubPath, o.Operator, o.Value.Raw
		})
	}
	if err != nil {
		return err
	}
	patch, err := decodeOps(ops)
	if err != nil {
		return err
	}
	return updateStringAtPointer(doc, f.FieldPath, func(s string) (string, error) {
		if hasJSON {
			return PatchJSONDocument(s, patch)
		}
		return PatchYAMLDocument(s, patch)
	})
}

// fieldOps turns a fieldOverrider's operations into JSON-patch operations.
func fieldOps[T any](in []T, get func(T) (string, policyv1alpha1.OverriderOperator, []byte)) ([]jsonPatchOp, error) {
	if len(in) > maxFieldOps {
		return nil, fmt.Errorf("%d operations, more than %d", len(in), maxFieldOps)
	}
	out := make([]jsonPatchOp, 0, len(in))
	for i, o := range in {
		path, operator, value := get(o)
		if path != "" && !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("[%d]: subPath %q must be empty or start with /", i, path)
		}
		op := jsonPatchOp{Op: string(operator), Path: path}
		switch operator {
		case policyv1alpha1.OverriderOpAdd, policyv1alpha1.OverriderOpReplace:
			if len(value) == 0 {
				return nil, fmt.Errorf("[%d] %s %s: value is required for the add and replace operators", i, operator, path)
			}
			if !json.Valid(value) {
				return nil, fmt.Errorf("[%d] %s %s: value is not valid JSON", i, operator, path)
			}
			op.Value = json.RawMessage(value)
		case policyv1alpha1.OverriderOpRemove:
		default:
			return nil, fmt.Errorf("[%d]: unknown operator %q", i, operator)
		}
		out = append(out, op)
	}
	return out, nil
}

func decodeOps(ops []jsonPatchOp) (jsonpatch.Patch, error) {
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false) // a value's "<" stays "<" in the document
	if err := enc.Encode(ops); err != nil {
		return nil, err
	}
	return jsonpatch.DecodePatch(raw.Bytes())
}

// patchOptions are evanphx/json-patch's defaults (Karmada's) but for HTML
// escaping: a config's "<" stays "<".
func patchOptions() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.EscapeHTML = false
	return o
}

// PatchJSONDocument applies patch to the JSON document s and returns the
// result, compact and in s's key order.
func PatchJSONDocument(s string, patch jsonpatch.Patch) (string, error) {
	if len(s) > MaxFieldDocumentBytes {
		return "", fmt.Errorf("the field holds %d bytes, more than %d", len(s), MaxFieldDocumentBytes)
	}
	data := bytes.TrimSpace([]byte(s))
	if len(data) == 0 {
		return "", errors.New("the field is empty, not a JSON document")
	}
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return "", fmt.Errorf("the field is not JSON: %v", err)
	}
	if d := jsonDepth(data); d > MaxFieldDepth {
		return "", fmt.Errorf("the JSON document is nested more than %d levels", MaxFieldDepth)
	}
	if data[0] != '{' && data[0] != '[' {
		return "", fmt.Errorf("the JSON document is %s, not an object or an array", jsonKind(data[0]))
	}
	out, err := patch.ApplyWithOptions(data, patchOptions())
	if err != nil {
		return "", err
	}
	if len(out) > MaxFieldExpandedBytes {
		return "", fmt.Errorf("the patched document is %d bytes, more than %d", len(out), MaxFieldExpandedBytes)
	}
	return string(out), nil
}

func jsonKind(first byte) string {
	switch first {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// jsonDepth is the deepest nesting of objects and arrays in valid JSON.
func jsonDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// PatchYAMLDocument applies patch to the YAML document s and returns the
// result as block YAML (see above for what is lost).
func PatchYAMLDocument(s string, patch jsonpatch.Patch) (out string, err error) {
	if len(s) > MaxFieldDocumentBytes {
		return "", fmt.Errorf("the field holds %d bytes, more than %d", len(s), MaxFieldDocumentBytes)
	}
	defer func() {
		// go-yaml reports errors by panicking and recovers them itself;
		// anything it did not recover must not take the hub down.
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("the YAML document cannot be processed: %v", r)
		}
	}()
	data, err := YAMLDocumentToJSON(s)
	if err != nil {
		return "", err
	}
	patched, err := patch.ApplyWithOptions(data, patchOptions())
	if err != nil {
		return "", err
	}
	if len(patched) > MaxFieldExpandedBytes {
		return "", fmt.Errorf("the patched document is %d bytes of JSON, more than %d", len(patched), MaxFieldExpandedBytes)
	}
	node, err := jsonToYAMLNode(patched)
	if err != nil {
		return "", fmt.Errorf("the patched document: %w", err)
	}
	var buf bytes.Buffer
	// go-yaml's emitter keeps every event of a stream (a few hundred
	// bytes each) until it is closed, so the top-level entries are written
	// in groups, each as a document of its own: mappings (or lists) written
	// one after the other are the whole mapping (or list).
	const group = 64
	parts := []*yaml.Node{node}
	if n := len(node.Content); node.Kind == yaml.MappingNode && n > 2*group || node.Kind == yaml.SequenceNode && n > group {
		step := group
		if node.Kind == yaml.MappingNode {
			step = 2 * group
		}
		parts = parts[:0]
		for i := 0; i < n; i += step {
			parts = append(parts, &yaml.Node{Kind: node.Kind, Tag: node.Tag, Content: node.Content[i:min(i+step, n)]})
		}
	}
	for _, part := range parts {
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(part); err != nil {
			return "", fmt.Errorf("writing the patched document as YAML: %w", err)
		}
		if err := enc.Close(); err != nil {
			return "", fmt.Errorf("writing the patched document as YAML: %w", err)
		}
	}
	return buf.String(), nil
}

// YAMLDocumentToJSON parses s as one YAML document whose root is a mapping
// or a sequence and returns its JSON form in document order, aliases and
// merge keys expanded within the bounds above.
func YAMLDocumentToJSON(s string) ([]byte, error) {
	dec := yaml.NewDecoder(strings.NewReader(s))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the field holds no YAML document")
		}
		return nil, fmt.Errorf("the field is not YAML: %v", err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil:
		return nil, errors.New("the field holds more than one YAML document")
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("the field is not YAML: %v", err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.AliasNode && root.Alias != nil {
		root = root.Alias
	}
	if root.Kind != yaml.MappingNode && root.Kind != yaml.SequenceNode {
		return nil, errors.New("the YAML document is a scalar, not a mapping or a sequence")
	}
	c := &yamlToJSON{}
	if err := c.value(root, 1); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// yamlToJSON writes a YAML node tree as JSON, counting what it writes.
type yamlToJSON struct {
	buf   bytes.Buffer
	steps int
}

var (
	errFieldTooLarge = fmt.Errorf("the YAML document expands to more than %d bytes of JSON (aliases and merge keys expanded)", MaxFieldExpandedBytes)
	errFieldTooDeep  = fmt.Errorf("the YAML document is nested more than %d levels (an alias counts one level more than its anchor)", MaxFieldDepth)
	errFieldTooMany  = fmt.Errorf("the YAML document expands to more than %d nodes (aliases and merge keys expanded)", maxFieldSteps)
)

func (c *yamlToJSON) step(depth int) error {
	c.steps++
	switch {
	case c.steps > maxFieldSteps:
		return errFieldTooMany
	case depth > MaxFieldDepth:
		return errFieldTooDeep
	case c.buf.Len() > MaxFieldExpandedBytes:
		return errFieldTooLarge
	}
	return nil
}

func (c *yamlToJSON) value(n *yaml.Node, depth int) error {
	if err := c.step(depth); err != nil {
		return err
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("an empty YAML document")
		}
		return c.value(n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return fmt.Errorf("line %d: alias %q to nothing", n.Line, n.Value)
		}
		return c.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		c.buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.value(item, depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.MappingNode:
		entries, err := c.entries(n, depth)
		if err != nil {
			return err
		}
		c.buf.WriteByte('{')
		for i, e := range entries {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			writeJSONString(&c.buf, e.key)
			c.buf.WriteByte(':')
			if err := c.value(e.val, depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte('}')
		return nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return fmt.Errorf("line %d: a YAML node of unknown kind", n.Line)
}

// mapEntry is one key of a mapping, merge keys resolved.
type mapEntry struct {
	key string
	val *yaml.Node
}

// entries are n's keys in document order, each merge key (<<) replaced by
// the keys it merges that n does not set itself; of several merged
// mappings the earlier wins (YAML's merge key type).
func (c *yamlToJSON) entries(n *yaml.Node, depth int) ([]mapEntry, error) {
	if len(n.Content)%2 != 0 {
		return nil, fmt.Errorf("line %d: a mapping with a key and no value", n.Line)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		if isMergeKey(k) {
			continue
		}
		key, err := mappingKey(k)
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("line %d: mapping key %q repeated", k.Line, truncate(key))
		}
		seen[key] = true
	}
	out := make([]mapEntry, 0, len(n.Content)/2)
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := c.step(depth); err != nil {
			return nil, err
		}
		if !isMergeKey(k) {
			key, _ := mappingKey(k)
			out = append(out, mapEntry{key, v})
			continue
		}
		sources, err := mergeSources(v)
		if err != nil {
			return nil, err
		}
		for _, src := range sources {
			merged, err := c.entries(src, depth+1)
			if err != nil {
				return nil, err
			}
			for _, e := range merged {
				if !seen[e.key] {
					seen[e.key] = true
					out = append(out, e)
				}
			}
		}
	}
	return out, nil
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// mergeSources are the mappings a merge key's value names: a mapping, an
// alias to one, or a sequence of those.
func mergeSources(v *yaml.Node) ([]*yaml.Node, error) {
	resolve := func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			return n.Alias
		}
		return n
	}
	v = resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}, nil
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, item := range v.Content {
			m := resolve(item)
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("line %d: a merge key (<<) takes a mapping or a list of mappings", item.Line)
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: a merge key (<<) takes a mapping or a list of mappings", v.Line)
}

// mappingKey is a key as JSON has it: the text of a scalar (1 and "1" are
// the same key).
func mappingKey(k *yaml.Node) (string, error) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: a mapping key that is not a scalar has no JSON form", k.Line)
	}
	return k.Value, nil
}

// scalar writes a scalar by its resolved core-schema tag; any other tag
// (!!timestamp, !!binary, an application's own) keeps the text as a string.
func (c *yamlToJSON) scalar(n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		c.buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		c.buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		switch i := v.(type) {
		case int:
			c.buf.WriteString(strconv.Itoa(i))
		case int64:
			c.buf.WriteString(strconv.FormatInt(i, 10))
		case uint64:
			c.buf.WriteString(strconv.FormatUint(i, 10))
		case float64:
			return c.float(n, i)
		default:
			return fmt.Errorf("line %d: integer %q has no JSON form", n.Line, truncate(n.Value))
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		return c.float(n, f)
	default:
		writeJSONString(&c.buf, n.Value)
	}
	return nil
}

func (c *yamlToJSON) float(n *yaml.Node, f float64) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("line %d: %s has no JSON form", n.Line, truncate(n.Value))
	}
	c.buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	return nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

// truncate cuts a value quoted in an error.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// jsonToYAMLNode reads JSON into a YAML node tree in its key order, for
// the encoder to write as block YAML.
func jsonToYAMLNode(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	r := &jsonReader{dec: dec, plain: map[string]bool{}}
	n, err := r.node(1)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return n, nil
}

// jsonReader reads JSON tokens into YAML nodes; plain memoizes
// readsAsString11 (keys repeat).
type jsonReader struct {
	dec   *json.Decoder
	plain map[string]bool
}

func (r *jsonReader) node(depth int) (*yaml.Node, error) {
	dec := r.dec
	if depth > MaxFieldDepth {
		return nil, fmt.Errorf("nested more than %d levels", MaxFieldDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, errors.New("an object key that is not a string")
				}
				v, err := r.node(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, r.stringNode(key), v)
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := r.node(depth + 1)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return r.stringNode(t), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// stringNode is a string scalar. go-yaml v3 quotes a string that YAML 1.2
// would read as another type; it is also quoted where a YAML 1.1 reader
// (go-yaml v2 and sigs.k8s.io/yaml, which Karmada and most Kubernetes
// tools use; PyYAML) would: yes, off, 1_000, 1:20 are strings in 1.2 but
// not in 1.1.
func (r *jsonReader) stringNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	plain, ok := r.plain[s]
	if !ok {
		plain = readsAsString11(s)
		r.plain[s] = plain
	}
	if !plain {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// readsAsString11 says whether YAML 1.1 reads s, unquoted, as the string
// s. Only short strings starting as a YAML 1.1 boolean, null, number or
// timestamp can read otherwise (or as a merge key, <<, or the value key, =).
func readsAsString11(s string) bool {
	if s == "" || len(s) > 64 || !strings.ContainsRune("0123456789+-.~nNyYoOtTfF=<", rune(s[0])) {
		return true
	}
	if c := s[0]; (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') && len(s) > len("false") {
		return true // no YAML 1.1 boolean or null is longer
	}
	var v interface{}
	if err := sigsyaml.Unmarshal([]byte(s), &v); err != nil {
		return false
	}
	str, ok := v.(string)
	return ok && str == s
}
