// Package framework gives the e2e specs a running Flotilla environment (a hub
// and member clusters) through a provider, and clients for it. Specs never
// know which provider made the environment.
package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Member is one member cluster of the environment.
type Member struct {
	// Name is the Cluster object's name on the hub.
	Name string
	// Context is the member's context in the environment's kubeconfig.
	Context string
	// DNS is host:port of the member's in-cluster DNS server, DNSMetrics
	// of its /metrics (empty when the environment does not say).
	DNS, DNSMetrics string
	// AgentHealth holds host:port of each agent's health endpoint.
	AgentHealth []string
	// AgentMetrics holds host:port of each agent's metrics endpoint.
	AgentMetrics []string
	// Agents are the agent processes' names (for Environment.Ctl), and
	// AgentNodes the node each of them plays, index for index.
	Agents, AgentNodes []string
	// Kubeconfig is a kubeconfig file for this member alone.
	Kubeconfig string
}

// Environment is a running hub with its members.
type Environment struct {
	// StateDir holds the environment's state; Prefix names its kwok
	// clusters ($PREFIX-hub, $PREFIX-member<i>); Ctl is hack/local-ctl.sh.
	StateDir, Prefix, CtlScript string
	// HubAgentKubeconfig is the kubeconfig agents use to reach the hub.
	HubAgentKubeconfig string
	Kubeconfig         string
	HubContext         string
	HubHealth          string
	HubMetrics         string
	// HubDNS is host:port of the hub's DNS traffic manager.
	HubDNS string
	// Prometheus is host:port of a Prometheus scraping the environment
	// (local-up.sh with MONITORING=1); empty when there is none.
	Prometheus string
	Members    []Member
	// Timings are the agent and hub timers the environment runs with.
	Timings Timings
	// ctl, when set, carries out Ctl instead of CtlScript (the kind provider).
	ctl func(ctx context.Context, action, name string) error
}

// LoadEnvironment reads the KEY=VALUE file hack/local-up.sh writes.
func LoadEnvironment(path string) (*Environment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), "=")
		if ok {
			kv[key] = strings.TrimSpace(value)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	env := &Environment{
		Kubeconfig: kv["KUBECONFIG"],
		HubContext: kv["HUB_CONTEXT"],
		HubHealth:  kv["HUB_HEALTH"],
		HubMetrics: kv["HUB_METRICS"],
		HubDNS:     kv["HUB_DNS"],
		StateDir:   kv["STATE_DIR"],
		Prefix:     kv["PREFIX"],
		CtlScript:  kv["CTL"],
		Prometheus: kv["PROMETHEUS"],
	}
	env.Timings = DefaultTimings()
	if env.StateDir != "" {
		env.HubAgentKubeconfig = filepath.Join(env.StateDir, "hub.kubeconfig")
		if env.Timings, err = readTimings(env.StateDir); err != nil {
			return nil, err
		}
	}
	n, err := strconv.Atoi(kv["MEMBERS"])
	if err != nil || env.Kubeconfig == "" || env.HubContext == "" {
		return nil, fmt.Errorf("%s: not an environment file (KUBECONFIG, HUB_CONTEXT, MEMBERS missing)", path)
	}
	for i := 1; i <= n; i++ {
		p := fmt.Sprintf("MEMBER%d_", i)
		env.Members = append(env.Members, Member{
			Name:         kv[p+"NAME"],
			Context:      kv[p+"CONTEXT"],
			DNS:          kv[p+"DNS"],
			DNSMetrics:   kv[p+"DNS_METRICS"],
			AgentHealth:  strings.Fields(kv[p+"AGENT_HEALTH"]),
			AgentMetrics: strings.Fields(kv[p+"AGENT_METRICS"]),
			Agents:       strings.Fields(kv[p+"AGENTS"]),
			AgentNodes:   strings.Fields(kv[p+"AGENT_NODES"]),
			Kubeconfig:   filepath.Join(env.StateDir, kv[p+"NAME"], "kubeconfig"),
		})
	}
	return env, nil
}

// RestConfig returns the client configuration of a context.
func (e *Environment) RestConfig(context string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: e.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	).ClientConfig()
}

// Kube returns a typed clientset for a context.
func (e *Environment) Kube(context string) (kubernetes.Interface, error) {
	cfg, err := e.RestConfig(context)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Ctl runs hack/local-ctl.sh ACTION NAME against this environment: stop,
// kill, start or restart a process (hub, agent-member1-0, coredns-member1),
// or stop-cluster / start-cluster a kwok cluster ($PREFIX-member1).
func (e *Environment) Ctl(ctx context.Context, action, name string) error {
	if e.ctl != nil {
		return e.ctl(ctx, action, name)
	}
	if e.CtlScript == "" {
		return fmt.Errorf("this environment has no control script (not made by the local provider)")
	}
	cmd := exec.CommandContext(ctx, e.CtlScript, action, name)
	cmd.Env = append(os.Environ(), "FLOTILLA_STATE_DIR="+e.StateDir, "FLOTILLA_PREFIX="+e.Prefix)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("local-ctl.sh %s %s: %w\n%s", action, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ClusterName is the kwok cluster name of a member (for stop-cluster).
func (e *Environment) ClusterName(m Member) string { return e.Prefix + "-" + m.Name }
