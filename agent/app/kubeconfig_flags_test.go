package app_test

import (
	"io"
	"testing"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/agent/app"
)

// The agent takes kubectl's --kubeconfig/--context for its member and
// --hub-kubeconfig/--hub-context for its hub identity; `agent dns-probe`
// takes the member pair only (it has no hub identity to pick a context of).
func TestKubeconfigFlagsOfAgentAndDNSProbe(t *testing.T) {
	o := app.NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--kubeconfig=/m", "--context=member", "--hub-kubeconfig=/h", "--hub-context=hub"}); err != nil {
		t.Fatal(err)
	}
	if o.Kubeconfig != "/m" || o.Context != "member" || o.HubKubeconfig != "/h" || o.HubContext != "hub" {
		t.Errorf("parsed kubeconfig %q context %q hub-kubeconfig %q hub-context %q", o.Kubeconfig, o.Context, o.HubKubeconfig, o.HubContext)
	}

	p := app.NewOptions()
	probe := pflag.NewFlagSet("dns-probe", pflag.ContinueOnError)
	p.AddDNSProbeFlags(probe)
	if err := probe.Parse([]string{"--context=member"}); err != nil || p.Context != "member" {
		t.Errorf("dns-probe --context: err %v, context %q", err, p.Context)
	}
	cmd := app.NewAgentCommand()
	cmd.SetArgs([]string{"dns-probe", "--hub-context=hub"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || err.Error() != "unknown flag: --hub-context" {
		t.Errorf("dns-probe --hub-context: want unknown flag, got %v", err)
	}
}
