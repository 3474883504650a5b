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
	corev1 "k8s.io/api/core/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// CheckList bounds every value of l, a decoded ResourceList, by Milli
// (NonNegativeMilli when nonNegative). It returns the first refused one by
// resource name (the same one on every call), as an *Error whose Path is
// path and the name.
func CheckList(l corev1.ResourceList, path string, nonNegative bool) error {
	var first *Error
	var firstName corev1.ResourceName
	for name, q := range l {
		if first != nil && name >= firstName {
			continue
		}
		var err error
		if nonNegative {
			_, err = NonNegativeMilli(&q)
		} else {
			_, err = Milli(&q)
		}
		if err != nil {
			first, firstName = err.(*Error), name
			first.Path = join(path, pathKey(string(name)))
		}
	}
	if first == nil {
		return nil
	}
	return first
}

// SummaryPath is where a Cluster keeps its resource summary.
const SummaryPath = "status.resourceSummary"

// CheckSummary bounds a member's resource summary (the agent writes it,
// so the hub trusts none of it): every allocatable, allocated and
// allocating value within Max and not negative. A summary it refuses is
// not used at all: one absurd value says the member's arithmetic, or its
// honesty, cannot be relied on for the others.
func CheckSummary(s *clusterv1alpha1.ResourceSummary) error {
	if s == nil {
		return nil
	}
	if err := CheckList(s.Allocatable, SummaryPath+".allocatable", true); err != nil {
		return err
	}
	if err := CheckList(s.Allocated, SummaryPath+".allocated", true); err != nil {
		return err
	}
	return CheckList(s.Allocating, SummaryPath+".allocating", true)
}

// SameSummary says whether a and b are the same summary as the hub reads
// one: the same resources with the same milli-values, a value out of
// range or negative being the same as any other such value (either makes
// the summary unused). It is what an informer's update handler compares
// instead of apiequality.Semantic.DeepEqual, whose Quantity.Cmp of
// "1e10000000" and "1" computes 10^N.
func SameSummary(a, b *clusterv1alpha1.ResourceSummary) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameList(a.Allocatable, b.Allocatable) && sameList(a.Allocated, b.Allocated) && sameList(a.Allocating, b.Allocating)
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return false
		}
		ma, errA := NonNegativeMilli(&qa)
		mb, errB := NonNegativeMilli(&qb)
		if (errA == nil) != (errB == nil) || ma != mb {
			return false
		}
	}
	return true
}
