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

package execution

import (
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSlowTickersStretchOnlyShortTickers(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
	c := slowTickers{WithTicker: fake, min: 10 * time.Second}
	fired := func(tk interface{ C() <-chan time.Time }) bool {
		select {
		case <-tk.C():
			return true
		default:
			return false
		}
	}
	short := c.NewTicker(500 * time.Millisecond) // client-go's unfinished-work update
	long := c.NewTicker(30 * time.Second)
	defer short.Stop()
	defer long.Stop()
	fake.Step(500 * time.Millisecond)
	if fired(short) {
		t.Fatal("a 500ms ticker fired after 500ms: not stretched")
	}
	fake.Step(9500 * time.Millisecond)
	if !fired(short) {
		t.Fatal("the stretched ticker did not fire after min")
	}
	if fired(long) {
		t.Fatal("a 30s ticker fired after 10s: a ticker longer than min must keep its period")
	}
	fake.Step(20 * time.Second)
	if !fired(long) {
		t.Fatal("the 30s ticker did not fire after 30s")
	}
	// Timers are the clock's own: the queue's delays are not stretched.
	timer := c.NewTimer(time.Second)
	fake.Step(time.Second)
	if !fired(timer) {
		t.Fatal("a 1s timer did not fire after 1s")
	}
}

// The Work queue still delays and hands out keys with the clock (a real
// one: the delaying queue's own timers are not stretched).
func TestWorkQueueWithSlowTickers(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: slowTickers{WithTicker: clock.RealClock{}, min: queueTickerMin}})
	defer q.ShutDown()
	q.Add("now")
	if k, _ := q.Get(); k != "now" {
		t.Fatalf("got %q", k)
	}
	q.Done("now")
	q.AddAfter("later", time.Millisecond)
	if k, _ := q.Get(); k != "later" {
		t.Fatalf("got %q after the delay, want later", k)
	}
}
