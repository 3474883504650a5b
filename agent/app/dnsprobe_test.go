package app_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/agent/app"
)

// `agent dns-probe` takes no hub, leader-election or Works flag: refused,
// not silently ignored (a probe pod must not be handed the hub token).
func TestDNSProbeCommandRefusesAgentOnlyFlags(t *testing.T) {
	for _, flag := range []string{"--hub-kubeconfig=/etc/flotilla/hub/hub.kubeconfig", "--cluster-name=member1", "--leader-elect=true",
		"--dns-quorum=all", "--concurrent-work-syncs=5", "--dns-probe=true", "--leader-elect-resource-namespace=x"} {
		cmd := app.NewAgentCommand()
		cmd.SetArgs([]string{"dns-probe", flag})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		name, _, _ := strings.Cut(flag, "=")
		if err == nil || !strings.Contains(err.Error(), "unknown flag: "+name) {
			t.Errorf("agent dns-probe %s: want unknown flag, got %v", flag, err)
		}
	}
	// And a stray argument is no subcommand of the agent.
	cmd := app.NewAgentCommand()
	cmd.SetArgs([]string{"dns-probe", "extra"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil {
		t.Error("agent dns-probe extra: want an error")
	}
}

func TestValidateDNSProbe(t *testing.T) {
	parse := func(t *testing.T, args ...string) *app.Options {
		t.Helper()
		o := app.NewOptions()
		fs := pflag.NewFlagSet("dns-probe", pflag.ContinueOnError)
		o.AddDNSProbeFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// The defaults are valid with no hub kubeconfig and no cluster name.
	if err := parse(t).ValidateDNSProbe(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if o := parse(t, "--namespace=agents", "--dns-detect-period=1s"); o.LeaderElection.ResourceNamespace != "agents" || o.DNSDetectPeriod != time.Second {
		t.Errorf("flags not bound: namespace %q period %s", o.LeaderElection.ResourceNamespace, o.DNSDetectPeriod)
	}
	for args, want := range map[string]string{
		"--namespace=":                                    "--namespace is required",
		"--dns-detect-period=0s":                          "--dns-detect-period must be positive",
		"--dns-probe-timeout=0s":                          "--dns-probe-timeout must be positive",
		"--dns-failure-threshold=-1s":                     "--dns-failure-threshold must not be negative",
		"--dns-success-threshold=-1s":                     "--dns-success-threshold must not be negative",
		"--dns-detect-period=5s --dns-stale-threshold=9s": "--dns-stale-threshold",
		"--kube-api-qps=0":                                "--kube-api-qps",
	} {
		err := parse(t, strings.Fields(args)...).ValidateDNSProbe()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", args, want, err)
		}
	}
}
