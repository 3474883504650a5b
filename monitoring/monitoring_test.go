package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool is the real promtool built by `make tools` (hack/tools/monitoring).
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := filepath.Abs("../bin/promtool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make tools` (or hack/build-tools.sh promtool)", bin)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func ruleGroups(t *testing.T) []ruleGroup {
	t.Helper()
	var f struct {
		Groups []ruleGroup `json:"groups"`
	}
	readYAML(t, "prometheus-alerts.yaml", &f)
	return f.Groups
}

func TestAlertRulesPassPromtool(t *testing.T) {
	promtool(t, "check", "rules", "prometheus-alerts.yaml")
	tests, err := filepath.Glob("tests/*.yaml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no promtool tests in tests/: %v", err)
	}
	promtool(t, append([]string{"test", "rules"}, tests...)...)
}

// TestPrometheusRuleMatchesRuleFile: operator users get the same groups.
func TestPrometheusRuleMatchesRuleFile(t *testing.T) {
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []ruleGroup `json:"groups"`
		} `json:"spec"`
	}
	readYAML(t, "prometheusrule.yaml", &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is %s %s", pr.APIVersion, pr.Kind)
	}
	if !reflect.DeepEqual(pr.Spec.Groups, ruleGroups(t)) {
		t.Error("prometheusrule.yaml's groups differ from prometheus-alerts.yaml's")
	}
}

// githubAnchors are the anchors GitHub gives the headings of a Markdown file.
func githubAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return anchors
}

// TestAlertsAreDocumented: every alert has a severity, a summary, a
// description and a runbook_url pointing at a section of
// docs/troubleshooting.md.
func TestAlertsAreDocumented(t *testing.T) {
	anchors := githubAnchors(t, "../docs/troubleshooting.md")
	const prefix = "https://github.com/flotilla-io/flotilla/blob/main/docs/troubleshooting.md#"
	n := 0
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], prefix)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not a section of docs/troubleshooting.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
}

// TestEveryAlertIsUnitTested: each alert is expected to fire in at least
// one promtool test, and expected not to in at least one.
func TestEveryAlertIsUnitTested(t *testing.T) {
	firing, quiet := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("tests/*.yaml")
	for _, f := range files {
		var tf struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		readYAML(t, f, &tf)
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !firing[r.Alert] {
				t.Errorf("%s: no promtool test expects it to fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no promtool test expects it not to fire", r.Alert)
			}
		}
	}
}

// documentedMetrics are the metric names in docs/metrics.md's tables.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)`").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames are the metric names an expression reads: identifiers that
// are Flotilla's, client-go's or a recording rule's (a colon), label values
// left out.
func metricNames(expr string) []string {
	var out []string
	for _, id := range identifier.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		if strings.Contains(id, ":") || strings.HasPrefix(id, "flotilla_") || strings.HasPrefix(id, "rest_client_") ||
			id == "up" || strings.HasPrefix(id, "process_") || strings.HasPrefix(id, "go_") {
			out = append(out, id)
		}
	}
	return out
}

// checkMetricNames fails for a name that exists nowhere: not documented in
// docs/metrics.md, not a recording rule of the mixin, not up/process_/go_.
func checkMetricNames(t *testing.T, where, expr string, documented, recorded map[string]bool) {
	t.Helper()
	for _, name := range metricNames(expr) {
		switch {
		case name == "up", strings.HasPrefix(name, "process_"), strings.HasPrefix(name, "go_"):
		case strings.Contains(name, ":"):
			if !recorded[name] {
				t.Errorf("%s: %s is not a recording rule of the mixin", where, name)
			}
		default:
			base := name
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, s); ok && documented[b] {
					base = b
				}
			}
			if !documented[base] {
				t.Errorf("%s: metric %s is not in docs/metrics.md", where, name)
			}
		}
	}
}

func recordedNames(t *testing.T) map[string]bool {
	recorded := map[string]bool{}
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	return recorded
}

// TestRulesReadMetricsThatExist: a renamed metric breaks its alert silently
// (an absent series never fires); this catches it.
func TestRulesReadMetricsThatExist(t *testing.T) {
	documented, recorded := documentedMetrics(t), recordedNames(t)
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			checkMetricNames(t, r.Alert+r.Record, r.Expr, documented, recorded)
		}
	}
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	GridPos *struct{ X, Y, W, H int } `json:"gridPos"`
}

// TestDashboards: valid JSON with a uid and the datasource variable, unique
// panel ids, every panel with a datasource and targets, every expression
// parsed by the real promtool and reading metrics that exist.
func TestDashboards(t *testing.T) {
	files, err := filepath.Glob("dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	documented, recorded := documentedMetrics(t), recordedNames(t)
	var exprs []string
	uids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID           string  `json:"uid"`
			Title         string  `json:"title"`
			SchemaVersion int     `json:"schemaVersion"`
			Panels        []panel `json:"panels"`
			Templating    struct {
				List []struct {
					Name, Type string
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d", f, d.UID, d.Title, d.SchemaVersion)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", f, other, d.UID)
		}
		uids[d.UID] = f
		if !slices.ContainsFunc(d.Templating.List, func(v struct{ Name, Type string }) bool {
			return v.Name == "datasource" && v.Type == "datasource"
		}) {
			t.Errorf("%s: no datasource variable", f)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			where := fmt.Sprintf("%s panel %d %q", f, p.ID, p.Title)
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: id missing or not unique", where)
			}
			ids[p.ID] = true
			if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: bad gridPos", where)
			}
			if p.Type == "row" {
				continue
			}
			if !strings.Contains(string(p.Datasource), "${datasource}") {
				t.Errorf("%s: datasource %s, want ${datasource}", where, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" {
					t.Errorf("%s: target without expr or refId", where)
					continue
				}
				checkMetricNames(t, where, tg.Expr, documented, recorded)
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	// promtool parses the expressions as recording rules, with Grafana's
	// variables replaced by what they stand for.
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", `"$cluster"`, `".*"`)
	var rules []map[string]string
	sort.Strings(exprs)
	for i, e := range slices.Compact(exprs) {
		e = vars.Replace(e)
		if strings.Contains(e, "$") {
			t.Errorf("an unknown Grafana variable in %q", e)
		}
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:expr_%d", i), "expr": e})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboards", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "dashboard-exprs.yaml")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", tmp)
}
