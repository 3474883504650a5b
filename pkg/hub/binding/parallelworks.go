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

package binding

import (
	"context"
	"sync"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// MaxParallelWorkWrites bounds the Work creates and updates one binding
// sync has in flight at once. A binding placed on 100 clusters (issue 40:
// one template to 100 of 1,000 clusters) waited 100 apiserver round trips
// when they were made one after the other; the apiserver commits parallel
// writes together. The hub's client rate limiter still bounds the
// controller as a whole.
const MaxParallelWorkWrites = 16

// workWrite is one target cluster's Work for ensureWorks, and its result.
type workWrite struct {
	cluster string
	want    *workv1alpha1.Work
	ok      bool
	err     error
}

// ensureWorks runs ensureWork for every write, up to MaxParallelWorkWrites
// at once, and records each result in it. Each write is its own cluster's
// Work: nothing they touch is shared but the caches and the client.
func (c *Controller) ensureWorks(ctx context.Context, binding *workv1alpha1.ResourceBinding, writes []workWrite) {
	if len(writes) == 1 {
		writes[0].ok, writes[0].err = c.ensureWork(ctx, binding, writes[0].want)
		return
	}
	sem := make(chan struct{}, MaxParallelWorkWrites)
	var wg sync.WaitGroup
	for i := range writes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			writes[i].ok, writes[i].err = c.ensureWork(ctx, binding, writes[i].want)
		}()
	}
	wg.Wait()
}
