package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Provider brings an environment up and down.
type Provider interface {
	// Up returns a running environment, creating it if needed.
	Up(ctx context.Context) (*Environment, error)
	// Down removes what Up created; an environment Up merely reused is kept.
	Down(ctx context.Context) error
}

// NewProvider returns the provider E2E_PROVIDER names ("local" by default).
func NewProvider(root string) (Provider, error) {
	switch name := os.Getenv("E2E_PROVIDER"); name {
	case "", "local":
		return newLocalProvider(root), nil
	case "kind":
		return newKindProvider(root)
	default:
		return nil, fmt.Errorf("E2E_PROVIDER=%q: unknown provider (known: local, kind)", name)
	}
}

// localProvider runs hack/local-up.sh: kwokctl binary-runtime clusters and
// the hub and agents as processes on this machine.
//
// E2E_STATE_DIR=<dir> reuses an environment `make up` already made (for
// example E2E_STATE_DIR=.local); otherwise the suite makes its own, under
// .local/e2e with its own names and ports so it never touches the
// developer's, and removes it afterwards (unless E2E_KEEP=1). Its own
// environment runs Prometheus (MONITORING=1) and ShortTimings
// (E2E_TIMINGS=default: the product's defaults, about twice the waiting).
type localProvider struct {
	root     string
	stateDir string
	reuse    bool
	timings  Timings
}

func newLocalProvider(root string) *localProvider {
	if dir := os.Getenv("E2E_STATE_DIR"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		return &localProvider{root: root, stateDir: dir, reuse: true}
	}
	timings := ShortTimings()
	if os.Getenv("E2E_TIMINGS") == "default" {
		timings = DefaultTimings()
	}
	return &localProvider{root: root, stateDir: filepath.Join(root, ".local", "e2e"), timings: timings}
}

func (p *localProvider) script(ctx context.Context, name string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(p.root, "hack", name))
	cmd.Env = append(os.Environ(),
		"FLOTILLA_PREFIX=flotilla-e2e",
		"FLOTILLA_STATE_DIR="+p.stateDir,
		"FLOTILLA_KUBECONFIG="+filepath.Join(p.stateDir, "kubeconfig"),
		"FLOTILLA_PORT_BASE=27000",
		"MEMBERS=3",
		"NODES=2",
		"AGENTS_PER_MEMBER=2",
		// HUB_FLAGS carries all of FAST=1's hub timers, from p.timings
		// (local-up.sh would append FAST's after them, and the last wins).
		"FAST=0",
		// A real Prometheus scraping it all, with the mixin's alert rules
		// (the Monitoring specs query it).
		"MONITORING=1",
		"HUB_FLAGS="+strings.Join(append(strings.Fields(os.Getenv("HUB_FLAGS")), p.timings.HubFlags()...), " "),
		"AGENT_FLAGS="+strings.Join(append(strings.Fields(os.Getenv("AGENT_FLAGS")), p.timings.AgentFlags()...), " "),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/%s: %w\n%s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *localProvider) Up(ctx context.Context) (*Environment, error) {
	if !p.reuse {
		if err := p.script(ctx, "local-up.sh"); err != nil {
			return nil, err
		}
		if err := writeTimings(p.stateDir, p.timings); err != nil {
			return nil, err
		}
	}
	env, err := LoadEnvironment(filepath.Join(p.stateDir, "environment"))
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	return env, nil
}

func (p *localProvider) Down(ctx context.Context) error {
	if p.reuse || os.Getenv("E2E_KEEP") == "1" {
		return nil
	}
	// Everything local-up started records a pid: Flotilla's processes in
	// pids/, each kwok cluster's components in kwok/clusters/*/pids/.
	pids, err := recordedPids(p.stateDir)
	if err != nil {
		return err
	}
	if err := p.script(ctx, "local-down.sh"); err != nil {
		return err
	}
	var alive []string
	for file, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !isZombie(pid) && p.ours(pid) {
			alive = append(alive, fmt.Sprintf("%s (pid %d)", file, pid))
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("local-down.sh left processes behind: %s", strings.Join(alive, ", "))
	}
	return nil
}

func recordedPids(stateDir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	kwok, err := filepath.Glob(filepath.Join(stateDir, "kwok", "clusters", "*", "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	for _, file := range append(files, kwok...) {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			pids[file] = pid
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no pid files under %s: was the environment started?", stateDir)
	}
	return pids, nil
}

// ours reports whether pid runs a process of this environment: every one
// of them has a path under the state directory on its command line. A pid
// file of a cluster the specs stopped and restarted can name a pid the
// system has since given to an unrelated process.
func (p *localProvider) ours(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err != nil || strings.Contains(string(cmdline), p.stateDir)
}

// isZombie reports whether pid has exited but not been reaped by its parent
// (it holds no resources; kwokctl's components can linger so).
func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}
