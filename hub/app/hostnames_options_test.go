package app

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestIngressHostNamespacesFlag: the flag repeats and keeps the commas of
// its namespace lists (a StringSlice would split them), and Validate refuses
// a rule that does not parse.
func TestIngressHostNamespacesFlag(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("hub", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--ingress-host-namespaces=example.com=team-a,team-b", "--ingress-host-namespaces=internal.example.com="}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com=team-a,team-b", "internal.example.com="}; !slices.Equal(o.IngressHostNamespaces, want) {
		t.Fatalf("rules %q, want %q", o.IngressHostNamespaces, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, bad := range []string{"example.com", "*.example.com=team-a", "example.com=Team_A"} {
		o := NewOptions()
		o.IngressHostNamespaces = []string{bad}
		if err := o.Validate(); err == nil {
			t.Errorf("Validate accepts --ingress-host-namespaces=%s", bad)
		}
	}
}
