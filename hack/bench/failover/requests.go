package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// requests are counted apiserver requests by who made them and the verb:
// "hub <client> <METHOD>" from the hub's flotilla_api_requests_total, and
// "agent→hub <METHOD>" / "agent→member <METHOD>" from member2's agents'
// rest_client_requests_total (summed over its agents; only the leader
// works).
type requests map[string]float64

// scrapeRequests reads addr's /metrics. hosts maps a rest client host
// (host:port) to the name it is counted under ("agent→hub").
func scrapeRequests(addr string, hosts map[string]string, into requests) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, labels, value, ok := series(line)
		if !ok {
			continue
		}
		switch {
		case name == "flotilla_api_requests_total" && hosts == nil:
			if labels["client"] == "leader-election" {
				continue // the hub's own lease, every 2 s: not the failover's
			}
			into["hub "+labels["client"]+" "+labels["method"]+failed(labels["code"])] += value
		case hosts == nil && (name == "workqueue_queue_duration_seconds_sum" || name == "workqueue_queue_duration_seconds_count" ||
			name == "workqueue_work_duration_seconds_sum" || name == "workqueue_work_duration_seconds_count"):
			// Where a controller's share of a step goes: waiting in its
			// queue, or in its sync (which holds its writes).
			into[queueKey+strings.TrimPrefix(name, "workqueue_")+" "+labels["name"]] += value
		case name == "rest_client_requests_total" && hosts != nil:
			if who, ok := hosts[labels["host"]]; ok {
				into[who+" "+labels["method"]+failed(labels["code"])] += value
			}
		}
	}
	return sc.Err()
}

// failed is " <code>" for a request that failed (a 409 is a conflict: the
// write is made again), "" for one that succeeded.
func failed(code string) string {
	if strings.HasPrefix(code, "2") {
		return ""
	}
	return " " + code
}

// queueKey prefixes the workqueue counters kept beside the requests.
const queueKey = "queue "

// series parses one sample line of the text format.
func series(line string) (name string, labels map[string]string, value float64, ok bool) {
	if strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:i]
	labels = map[string]string{}
	name, rest, has := strings.Cut(head, "{")
	if has {
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			k, val, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(val, `"`)
		}
	}
	return name, labels, v, true
}

// hostOf is a rest.Config Host's host:port, as rest_client_requests_total
// labels it.
func hostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	return u.Host
}

func (r requests) minus(before requests) requests {
	out := requests{}
	for k, v := range r {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// requestTable prints, for every counter that moved in some run, its
// median and range over the runs.
func requestTable(runs []requests) string {
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r {
			keys[k] = true
		}
	}
	var names []string
	for k := range keys {
		if !strings.HasPrefix(k, queueKey) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "| requests (who, verb) | p50 | range |\n|---|---|---|\n")
	for _, k := range names {
		var l []float64
		for _, r := range runs {
			l = append(l, r[k])
		}
		sort.Float64s(l)
		fmt.Fprintf(&b, "| %s | %g | %g–%g |\n", k, medianF(l), l[0], l[len(l)-1])
	}
	return b.String()
}

func medianF(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// counters scrapes the hub and member2's agents at once.
type counters struct {
	hub    string
	agents []string
	hosts  map[string]string
}

func (c counters) scrape() (hub, agents requests, at time.Time) {
	hub, agents = requests{}, requests{}
	at = time.Now()
	_ = scrapeRequests(c.hub, nil, hub)
	for _, a := range c.agents {
		_ = scrapeRequests(a, c.hosts, agents)
	}
	return hub, agents, at
}

// queueTable prints, per hub controller whose queue moved, the items it
// took in the window and their mean wait in the queue and mean sync time
// (medians over the runs).
func queueTable(runs []requests) string {
	names := map[string]bool{}
	for _, r := range runs {
		for k := range r {
			if n, ok := strings.CutPrefix(k, queueKey+"queue_duration_seconds_count "); ok {
				names[n] = true
			}
		}
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	var b strings.Builder
	fmt.Fprintf(&b, "| hub queue | items | mean wait in queue | mean sync |\n|---|---|---|---|\n")
	for _, n := range list {
		var items, wait, work []float64
		for _, r := range runs {
			c := r[queueKey+"queue_duration_seconds_count "+n]
			items = append(items, c)
			if c > 0 {
				wait = append(wait, r[queueKey+"queue_duration_seconds_sum "+n]/c*1000)
			}
			if wc := r[queueKey+"work_duration_seconds_count "+n]; wc > 0 {
				work = append(work, r[queueKey+"work_duration_seconds_sum "+n]/wc*1000)
			}
		}
		sort.Float64s(items)
		sort.Float64s(wait)
		sort.Float64s(work)
		if len(wait) == 0 {
			continue
		}
		mw := 0.0
		if len(work) > 0 {
			mw = medianF(work)
		}
		fmt.Fprintf(&b, "| %s | %g | %.1f ms | %.1f ms |\n", n, medianF(items), medianF(wait), mw)
	}
	return b.String()
}
