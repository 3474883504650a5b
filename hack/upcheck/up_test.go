// Package upcheck keeps `make up` honest about what it builds: exactly the
// binaries hack/local-up.sh runs, nothing more (a cold `make up` used to
// build the code generators and the linter, minutes of compiling for tools
// it never ran).
package upcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// binRef is a binary a script runs from bin/: "$BIN/kwokctl", or a tool
// kwokctl is given ("--etcd-binary "$BIN/etcd"").
var binRef = regexp.MustCompile(`\$BIN/([a-z][a-z0-9-]*)`)

// localUpRuns returns the bin/ binaries hack/local-up.sh runs, itself or
// through kwokctl, and through hack/lib.sh (KWOKCTL, KUBECTL).
func localUpRuns(t *testing.T, root string) map[string]bool {
	t.Helper()
	runs := map[string]bool{}
	for _, script := range []string{"hack/local-up.sh", "hack/lib.sh"} {
		data, err := os.ReadFile(filepath.Join(root, script))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range binRef.FindAllStringSubmatch(string(data), -1) {
			runs[m[1]] = true
		}
	}
	return runs
}

// makeUpBuilds returns what `make -n up` builds: the tools it hands
// hack/build-tools.sh, and the binaries `go build -o` writes. all is true
// when build-tools.sh is called without names (it then builds every recipe).
func makeUpBuilds(t *testing.T, root string, env ...string) (tools, built map[string]bool, all bool) {
	t.Helper()
	cmd := exec.Command("make", "-n", "--no-print-directory", "up")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), append([]string{"FLOTILLA_BIN=" + t.TempDir()}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n up: %v\n%s", err, out)
	}
	tools, built = map[string]bool{}, map[string]bool{}
	output := regexp.MustCompile(`(?:^|\s)-o\s+(\S+)`)
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.HasSuffix(fields[0], "hack/build-tools.sh") {
			if len(fields) == 1 {
				all = true
			}
			for _, f := range fields[1:] {
				tools[f] = true
			}
		}
		if strings.Contains(line, "go build") {
			for _, m := range output.FindAllStringSubmatch(line, -1) {
				built[filepath.Base(m[1])] = true
			}
		}
	}
	return tools, built, all
}

// recipes are the tool names hack/build-tools.sh has a recipe for.
func recipes(t *testing.T, root string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "hack/build-tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*"([a-z][a-z0-9-]*)\|`).FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	if len(names) == 0 {
		t.Fatal("no recipes found in hack/build-tools.sh")
	}
	return names
}

func sorted(set map[string]bool) []string {
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestMakeUpBuildsOnlyWhatLocalUpRuns(t *testing.T) {
	root := repoRoot(t)
	known := recipes(t, root)
	for _, tc := range []struct {
		monitoring string
		// prometheus: whether local-up.sh runs $BIN/prometheus.
		prometheus bool
	}{{"0", false}, {"1", true}} {
		t.Run("MONITORING="+tc.monitoring, func(t *testing.T) {
			runs := localUpRuns(t, root)
			if tc.prometheus && !runs["prometheus"] {
				t.Error("hack/local-up.sh runs no $BIN/prometheus (MONITORING=1)")
			}
			if !tc.prometheus {
				delete(runs, "prometheus")
			}
			tools, built, all := makeUpBuilds(t, root, "MONITORING="+tc.monitoring)
			if all {
				t.Fatalf("make up runs hack/build-tools.sh without names: it builds every tool (%s), not only what local-up.sh runs (%s)",
					strings.Join(sorted(known), " "), strings.Join(sorted(runs), " "))
			}
			for _, tool := range sorted(tools) {
				if !known[tool] {
					t.Errorf("make up builds %q: hack/build-tools.sh has no recipe for it", tool)
				}
				if !runs[tool] {
					t.Errorf("make up builds the tool %q, which hack/local-up.sh never runs", tool)
				}
			}
			for _, bin := range sorted(runs) {
				if !tools[bin] && !built[bin] {
					t.Errorf("hack/local-up.sh runs $BIN/%s, which make up does not build (tools: %v; go build: %v)", bin, sorted(tools), sorted(built))
				}
			}
		})
	}
}
