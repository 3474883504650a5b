package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The local environment runs a real Prometheus (hack/local-up.sh with
// MONITORING=1, as `make up MONITORING=1` does): these specs prove it
// scrapes every Flotilla process and CoreDNS, sees the hub's view of the
// fleet, and loaded the mixin's alert rules without errors.
var _ = Describe("Monitoring (make up MONITORING=1)", func() {
	BeforeEach(func() {
		if env.Prometheus != "" {
			return
		}
		// The local provider's own environment always asks for one; a
		// reused `make up` or the kind provider may have none.
		if p := os.Getenv("E2E_PROVIDER"); (p == "" || p == "local") && os.Getenv("E2E_STATE_DIR") == "" {
			Fail("the local provider's environment runs no Prometheus: hack/local-up.sh ignored MONITORING=1 (no PROMETHEUS= in its environment file)")
		}
		Skip("this environment runs no Prometheus (hack/local-up.sh with MONITORING=1 does)")
	})

	It("scrapes the hub, every agent and every member's CoreDNS, all up", func(ctx SpecContext) {
		want := []string{"prometheus " + env.Prometheus, "flotilla-hub " + env.HubMetrics}
		for _, m := range env.Members {
			for _, a := range m.AgentMetrics {
				want = append(want, "flotilla-agent "+a)
			}
			want = append(want, "coredns "+m.DNSMetrics)
		}
		sort.Strings(want)
		Eventually(ctx, func(g Gomega) {
			var targets struct {
				ActiveTargets []struct {
					ScrapePool string `json:"scrapePool"`
					ScrapeURL  string `json:"scrapeUrl"`
					Health     string `json:"health"`
					LastError  string `json:"lastError"`
				} `json:"activeTargets"`
			}
			g.Expect(monitoringGet(ctx, "/api/v1/targets", nil, &targets)).To(Succeed())
			var got []string
			for _, t := range targets.ActiveTargets {
				u, err := url.Parse(t.ScrapeURL)
				g.Expect(err).NotTo(HaveOccurred())
				got = append(got, t.ScrapePool+" "+u.Host)
				g.Expect(t.Health).To(Equal("up"), "%s %s: %s", t.ScrapePool, t.ScrapeURL, t.LastError)
			}
			sort.Strings(got)
			g.Expect(got).To(Equal(want))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("sees every member Ready through the hub's flotilla_hub_cluster_ready", func(ctx SpecContext) {
		var want []string
		for _, m := range env.Members {
			want = append(want, m.Name)
		}
		sort.Strings(want)
		// A spec before this one may have stopped a member; it is Ready
		// again within the Ready thresholds and a scrape interval.
		Eventually(ctx, func(g Gomega) {
			var res struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			}
			g.Expect(monitoringGet(ctx, "/api/v1/query", url.Values{"query": {`flotilla_hub_cluster_ready{status="True"} == 1`}}, &res)).To(Succeed())
			var got []string
			for _, r := range res.Result {
				got = append(got, r.Metric["cluster"])
			}
			sort.Strings(got)
			g.Expect(got).To(Equal(want))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("loaded the mixin's alert rules (monitoring/prometheus-alerts.yaml), each evaluating without error", func(ctx SpecContext) {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(filepath.Join(root, "monitoring", "prometheus-alerts.yaml"))
		if os.IsNotExist(err) {
			Skip("no monitoring/prometheus-alerts.yaml in this checkout")
		}
		Expect(err).NotTo(HaveOccurred())
		var file struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert  string `json:"alert"`
					Record string `json:"record"`
				} `json:"rules"`
			} `json:"groups"`
		}
		Expect(yaml.Unmarshal(data, &file)).To(Succeed())
		Expect(file.Groups).NotTo(BeEmpty(), "prometheus-alerts.yaml has no groups")
		var want []string
		for _, g := range file.Groups {
			for _, r := range g.Rules {
				want = append(want, g.Name+"/"+r.Alert+r.Record)
			}
		}
		sort.Strings(want)
		// Every rule has been evaluated at least once (health ok, not
		// unknown) and none failed (err: a bad expression or a clash).
		Eventually(ctx, func(g Gomega) {
			var rules struct {
				Groups []struct {
					Name  string `json:"name"`
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			}
			g.Expect(monitoringGet(ctx, "/api/v1/rules", nil, &rules)).To(Succeed())
			var got []string
			for _, gr := range rules.Groups {
				for _, r := range gr.Rules {
					got = append(got, gr.Name+"/"+r.Name)
					g.Expect(r.Health).To(Equal("ok"), "%s/%s: %s", gr.Name, r.Name, r.LastError)
				}
			}
			sort.Strings(got)
			g.Expect(got).To(Equal(want))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})

// monitoringGet GETs a Prometheus HTTP API path of env.Prometheus and
// decodes the response's data into out.
func monitoringGet(ctx context.Context, path string, query url.Values, out any) error {
	u := url.URL{Scheme: "http", Host: env.Prometheus, Path: path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("GET %s: %s: %w", u.String(), strings.TrimSpace(string(body)), err)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("GET %s: %s %s", u.String(), envelope.Status, envelope.Error)
	}
	return json.Unmarshal(envelope.Data, out)
}
