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

// Package statepreservation reads the values a failover carries from the
// copy of a workload on the cluster it leaves to the copies that replace it
// (failover.{cluster,application}.statePreservation, Karmada's stateful
// failover): each rule's jsonPath, relative to the workload's .status,
// selects one string, number or boolean that becomes the value of the
// rule's label. A rule that cannot be read carries nothing; the others
// still do, and the failover never waits for them.
package statepreservation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/jsonpath"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// RuleError is why one rule carried nothing.
type RuleError struct {
	Label    string
	JSONPath string
	Reason   string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("rule %s (jsonPath %s): %s", e.Label, e.JSONPath, e.Reason)
}

// Validate checks what the CRD's schema cannot: that each jsonPath parses
// as a kubectl JSONPath template and each aliasLabelName is a label key.
// It returns one error per bad rule.
func Validate(rules []policyv1alpha1.StatePreservationRule) error {
	var errs []error
	for _, r := range rules {
		if err := validateRule(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateRule(r policyv1alpha1.StatePreservationRule) error {
	if msgs := validation.IsQualifiedName(r.AliasLabelName); len(msgs) > 0 {
		return &RuleError{r.AliasLabelName, r.JSONPath, "aliasLabelName is not a label key: " + strings.Join(msgs, "; ")}
	}
	if _, err := parse(r); err != nil {
		return err
	}
	if _, err := pattern(r); err != nil {
		return err
	}
	return nil
}

// MaxPatternLength bounds a rule's valuePattern (the CRD says so too).
const MaxPatternLength = 256

// pattern compiles the rule's valuePattern, anchored so the whole value
// must match; nil when the rule has none. RE2: matching is linear in the
// value's length, whatever the pattern.
func pattern(r policyv1alpha1.StatePreservationRule) (*regexp.Regexp, error) {
	if r.ValuePattern == "" {
		return nil, nil
	}
	if len(r.ValuePattern) > MaxPatternLength {
		return nil, &RuleError{r.AliasLabelName, r.JSONPath, fmt.Sprintf("valuePattern is longer than %d characters", MaxPatternLength)}
	}
	re, err := regexp.Compile(`^(?:` + r.ValuePattern + `)$`)
	if err != nil {
		return nil, &RuleError{r.AliasLabelName, r.JSONPath, "valuePattern does not compile: " + err.Error()}
	}
	return re, nil
}

func parse(r policyv1alpha1.StatePreservationRule) (*jsonpath.JSONPath, error) {
	jp := jsonpath.New(r.AliasLabelName)
	if err := jp.Parse(r.JSONPath); err != nil {
		return nil, &RuleError{r.AliasLabelName, r.JSONPath, "jsonPath does not parse: " + err.Error()}
	}
	return jp, nil
}

// Extract reads every rule's value from status (the workload's .status as
// its cluster reported it). It returns the labels it could read and one
// error per rule it could not (a bad rule, a missing field, a value that
// is not a single string, number or boolean, or longer than
// MaxValueLength). A value that is not a valid label value (a checkpoint
// path such as s3://bucket/ckpt-42) is still carried: Split puts it on the
// new copy as an annotation of the same key.
func Extract(rules []policyv1alpha1.StatePreservationRule, status *runtime.RawExtension) (map[string]string, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var data any
	if status != nil && len(status.Raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(status.Raw))
		dec.UseNumber() // 12345678901234567 stays itself, not 1.2345678901234568e+16
		if err := dec.Decode(&data); err != nil {
			return nil, fmt.Errorf("the reported status is not JSON: %w", err)
		}
	}
	if data == nil {
		return nil, errors.New("the cluster reported no status for the workload; no state is carried")
	}
	out := map[string]string{}
	var errs []error
	for _, r := range rules {
		v, err := extractOne(r, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[r.AliasLabelName] = v
	}
	if len(out) == 0 {
		out = nil
	}
	return out, errors.Join(errs...)
}

func extractOne(r policyv1alpha1.StatePreservationRule, data any) (string, error) {
	if err := validateRule(r); err != nil {
		return "", err
	}
	jp, _ := parse(r)
	fail := func(format string, args ...any) (string, error) {
		return "", &RuleError{r.AliasLabelName, r.JSONPath, fmt.Sprintf(format, args...)}
	}
	results, err := jp.FindResults(data)
	if err != nil {
		return fail("%v", err)
	}
	var values []reflect.Value
	for _, rs := range results {
		values = append(values, rs...)
	}
	if len(values) != 1 {
		return fail("selects %d values, want exactly one", len(values))
	}
	v := values[0]
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return fail("selects null")
		}
		v = v.Elem()
	}
	var s string
	switch v.Kind() {
	case reflect.String: // also json.Number
		s = v.String()
	case reflect.Bool:
		s = strconv.FormatBool(v.Bool())
	case reflect.Float64:
		s = strconv.FormatFloat(v.Float(), 'f', -1, 64)
	case reflect.Int, reflect.Int64, reflect.Int32:
		s = strconv.FormatInt(v.Int(), 10)
	default:
		return fail("selects a %s, want a string, number or boolean", kindName(v.Kind()))
	}
	if len(s) > MaxValueLength {
		return fail("value %q is %d bytes long, more than the %d a preserved value may have", truncate(s, 80), len(s), MaxValueLength)
	}
	// The value is what the member reported: a claim. The policy's
	// pattern decides whether it is carried to other clusters.
	if re, _ := pattern(r); re != nil && !re.MatchString(s) {
		return fail("value %q does not match valuePattern %q; not carried", truncate(s, 80), r.ValuePattern)
	}
	return s, nil
}

// MaxValueLength bounds a preserved value: it is stored on the binding's
// eviction task and history and on the new copy.
const MaxValueLength = 4096

// Split divides preserved state into what goes on the new copy as labels
// (valid label values, so selectors and operators that read labels see
// them) and as annotations (anything else, e.g. a path with slashes).
func Split(state map[string]string) (labels, annotations map[string]string) {
	for k, v := range state {
		if len(validation.IsValidLabelValue(v)) == 0 {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
			continue
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = v
	}
	return labels, annotations
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Map:
		return "map"
	case reflect.Slice, reflect.Array:
		return "list"
	}
	return k.String()
}

// truncate bounds s to n bytes, cut on a character.
func truncate(s string, n int) string {
	return statuslimits.Truncate(s, n)
}

// StatusOf is the last status the hub saw of the workload on cluster, nil
// when it has none.
func StatusOf(items []workv1alpha1.AggregatedStatusItem, cluster string) *runtime.RawExtension {
	for i := range items {
		if items[i].ClusterName == cluster {
			return items[i].Status
		}
	}
	return nil
}

// ForEviction is the state an eviction from cluster carries: sp's rules
// read from the binding's last aggregated status of cluster. Nil rules
// carry nothing and report nothing.
func ForEviction(sp *policyv1alpha1.StatePreservation, items []workv1alpha1.AggregatedStatusItem, cluster string) (map[string]string, error) {
	if sp == nil || len(sp.Rules) == 0 {
		return nil, nil
	}
	return Extract(sp.Rules, StatusOf(items, cluster))
}

// Describe renders labels as sorted k=v pairs, for events and logs.
func Describe(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}
