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

package customization

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a parsed JSON pointer (RFC 6901): the unescaped reference
// tokens. An array index is a token of digits.
type Pointer []string

// ParsePointer parses s, which must start with "/" ("" is the whole
// document and is refused: a rule names a field).
func ParsePointer(s string) (Pointer, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("must be a JSON pointer starting with /")
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 >= len(p) || p[j+1] != '0' && p[j+1] != '1') {
				return nil, fmt.Errorf("~ must be followed by 0 or 1 (RFC 6901)")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return Pointer(parts), nil
}

// String is the pointer in its escaped form.
func (p Pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// Get returns the value at p in doc and whether it is there.
func (p Pointer) Get(doc map[string]any) (any, bool) {
	var cur any = doc
	for _, t := range p {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || t != strconv.Itoa(i) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Set writes v at p in doc, creating the maps on the way. A list on the
// way must already have the index; a scalar on the way is an error.
func (p Pointer) Set(doc map[string]any, v any) error {
	if len(p) == 0 {
		return fmt.Errorf("empty pointer")
	}
	var cur any = doc
	for i, t := range p {
		last := i == len(p)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = v
				return nil
			}
			next, ok := c[t]
			if !ok || next == nil {
				next = map[string]any{}
				c[t] = next
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(c) || t != strconv.Itoa(idx) {
				return fmt.Errorf("%s: no element %q", Pointer(p[:i]), t)
			}
			if last {
				c[idx] = v
				return nil
			}
			cur = c[idx]
		default:
			return fmt.Errorf("%s is not an object or a list", Pointer(p[:i]))
		}
	}
	return nil
}

// Delete removes the value at p from doc (a map entry; list elements are
// not removed). Absent: nothing happens.
func (p Pointer) Delete(doc map[string]any) {
	if len(p) == 0 {
		return
	}
	parent, ok := p[:len(p)-1].Get(doc)
	if !ok {
		return
	}
	if m, ok := parent.(map[string]any); ok {
		delete(m, p[len(p)-1])
	}
}
