package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// An agent restarted with every Work applied writes no Work status and
// re-applies nothing: each Work is synced once (every manifest Unchanged),
// and no Work changes on the hub. Issue 20: at 5,000 Works a restart that
// rewrote each status would cost the hub 5,000 writes. The check is on
// counts (the agent's metrics, the Works' resourceVersions), never on time.
func TestAgentRestartRewritesNothingUnchanged(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	ctx := context.Background()
	cfg := rest.CopyConfig(f.hub.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	fc := flotillaclient.NewForConfigOrDie(cfg)
	const configMaps, deployments = 200, 100
	n := configMaps + deployments
	scaleCreateWorks(t, fc, f.clusterNamespace, configMaps, "configmap")
	for i := range deployments {
		w := scaleWork(t, f.clusterNamespace, fmt.Sprintf("d-%05d", i), "deployment")
		if _, err := fc.WorkV1alpha1().Works(f.clusterNamespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hubHost, memberHost := scaleHost(t, f.hub.Config.Host), scaleHost(t, f.member.Config.Host)

	opts := f.fastOptions("node-a")
	opts.MetricsBindAddress = f.metrics
	stop := runAgentUntilStopped(t, opts)
	versions := func() (map[string]string, int) {
		list, err := fc.WorkV1alpha1().Works(f.clusterNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs, applied := map[string]string{}, 0
		for _, w := range list.Items {
			rvs[w.Name] = w.ResourceVersion
			for _, c := range w.Status.Conditions {
				if c.Type == workv1alpha1.WorkConditionApplied && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation {
					applied++
				}
			}
		}
		return rvs, applied
	}
	poll(t, 3*time.Minute, "every Work Applied", func() bool { _, applied := versions(); return applied == n })
	// Settled: every sync has finished (none in flight after all were
	// applied), so no write of the first agent can land after this.
	poll(t, 30*time.Second, "the first agent idle", func() bool {
		m, err := scrapeAgent(f.metrics, hubHost, memberHost)
		return err == nil && m.inFlight == 0
	})
	before, _ := versions()
	stop()

	opts = f.fastOptions("node-a")
	opts.MetricsBindAddress = f.metrics
	runAgent(t, opts)
	var m scaleMetrics
	poll(t, 3*time.Minute, "the restarted agent to sync every Work", func() bool {
		var err error
		m, err = scrapeAgent(f.metrics, hubHost, memberHost)
		return err == nil && m.applies >= float64(n)
	})
	// Every sync counted above has ended once none is in flight: its
	// status write, if it made one, has been counted.
	poll(t, 30*time.Second, "the restarted agent idle", func() bool {
		var err error
		m, err = scrapeAgent(f.metrics, hubHost, memberHost)
		return err == nil && m.inFlight == 0
	})
	if m.statusWrites != 0 {
		t.Errorf("the restarted agent wrote %v Work statuses, want 0", m.statusWrites)
	}
	if m.byOutcome["Unchanged"] != float64(n) || m.applies != float64(n) {
		t.Errorf("manifest outcomes after the restart: %s; want Unchanged %d and nothing else", m.outcomes(), n)
	}
	after, _ := versions()
	changed := 0
	for name, rv := range after {
		if before[name] != rv {
			changed++
		}
	}
	if changed != 0 {
		t.Errorf("the restart changed %d of %d Works", changed, n)
	}
}
