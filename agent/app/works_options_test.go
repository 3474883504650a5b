package app_test

import (
	"strings"
	"testing"
)

// --allowed-system-namespaces names only protected namespaces (the system
// ones and the agent's own): anything else is a typo that would silently
// allow nothing.
func TestAllowedSystemNamespacesMustBeProtected(t *testing.T) {
	o := validOptions()
	o.LeaderElection.ResourceNamespace = "agents"
	o.AllowedSystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "flotilla-system", "agents"}
	if err := o.Validate(); err != nil {
		t.Fatalf("every protected namespace may be allowed: %v", err)
	}
	o.AllowedSystemNamespaces = []string{"kube-sytem"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `--allowed-system-namespaces: "kube-sytem" is not a protected namespace`) {
		t.Fatalf("Validate = %v, want the unknown namespace named", err)
	}
	if o := validOptions(); len(o.AllowedSystemNamespaces) != 0 || o.AllowFlotillaKinds {
		t.Fatalf("defaults allow something: %v %v", o.AllowedSystemNamespaces, o.AllowFlotillaKinds)
	}
}
