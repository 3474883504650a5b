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

package resourceinterpreter

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// ReviseCompletions gives a Divided Job on cluster its share of
// spec.completions: each cluster's Job is a separate Job that completes on
// its own, so without this every cluster would run all completions. The
// shares follow the clusters' shares of parallelism (targets' replicas)
// and sum to the template's completions (DivideCompletions). A Job without
// completions is a work queue and stays so; other kinds are left alone.
func ReviseCompletions(obj *unstructured.Unstructured, targets []workv1alpha1.TargetCluster, cluster string) error {
	if obj.GroupVersionKind().GroupKind() != jobKind {
		return nil
	}
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", "completions")
	if err != nil || !found || v == nil {
		return err
	}
	total, ok := asInt64(v)
	if !ok || total < 0 || total > math.MaxInt32 {
		return fmt.Errorf(".spec.completions: %v is not a count", v)
	}
	i := slices.IndexFunc(targets, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster })
	if i < 0 {
		return nil
	}
	names := make([]string, len(targets))
	weights := make([]int32, len(targets))
	for j, t := range targets {
		names[j], weights[j] = t.Name, t.Replicas
	}
	shares := DivideCompletions(int32(total), weights, names)
	return unstructured.SetNestedField(obj.Object, int64(shares[i]), "spec", "completions")
}

// DivideCompletions splits total in proportion to weights (each cluster's
// parallelism) by largest remainder, ties to the earlier name, so the
// shares sum exactly to total. When total is at least the number of
// clusters with weight, none of them gets 0 (a Job with completions 0 would
// count as done at once while it was meant to work): each such cluster
// takes one from the cluster with the most. With no weight at all the
// split is even.
func DivideCompletions(total int32, weights []int32, names []string) []int32 {
	n := len(weights)
	out := make([]int32, n)
	if n == 0 || total <= 0 {
		return out
	}
	var sum int64
	for _, w := range weights {
		if w > 0 {
			sum += int64(w)
		}
	}
	w := make([]int64, n)
	for i := range weights {
		switch {
		case sum == 0:
			w[i] = 1
		case weights[i] > 0:
			w[i] = int64(weights[i])
		}
	}
	if sum == 0 {
		sum = int64(n)
	}
	type rem struct {
		i int
		r int64
	}
	rems := make([]rem, n)
	var given int64
	for i := range w {
		q := int64(total) * w[i]
		out[i] = int32(q / sum)
		given += int64(out[i])
		rems[i] = rem{i, q % sum}
	}
	sort.SliceStable(rems, func(a, b int) bool {
		if rems[a].r != rems[b].r {
			return rems[a].r > rems[b].r
		}
		return names[rems[a].i] < names[rems[b].i]
	})
	for k := 0; given < int64(total); k++ {
		out[rems[k%n].i]++
		given++
	}
	var working int32
	for i := range w {
		if w[i] > 0 {
			working++
		}
	}
	if total < working {
		return out
	}
	for i := range w {
		if w[i] == 0 || out[i] > 0 {
			continue
		}
		most := 0
		for j := range out {
			if out[j] > out[most] || out[j] == out[most] && names[j] < names[most] {
				most = j
			}
		}
		out[most]--
		out[i]++
	}
	return out
}
