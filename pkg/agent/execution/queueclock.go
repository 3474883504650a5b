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
	"time"

	"k8s.io/utils/clock"
)

// queueTickerMin is how often, at the most, the Work queue's tickers fire:
// client-go's unfinished-work update (workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds) ran every 500 ms whether or
// not there was work, the idle leader's most frequent wakeup (issue 40: 20
// of its 100 ms of CPU a minute). 10 s is the delaying queue's own heartbeat,
// and the gauges still show a stuck worker long before any alert would.
const queueTickerMin = 10 * time.Second

// slowTickers is a clock whose tickers fire at least min apart; everything
// else (timers, Now, Since: the queue's delays and latency metrics) is the
// underlying clock's.
type slowTickers struct {
	clock.WithTicker
	min time.Duration
}

func (c slowTickers) NewTicker(d time.Duration) clock.Ticker {
	return c.WithTicker.NewTicker(max(d, c.min))
}
