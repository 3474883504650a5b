// Package manifeststest holds the tests that keep the shipped manifests
// (manifests/hub, manifests/agent, rendered through kustomize/) and the
// binaries from drifting apart: every flag in the hub Deployment and the agent
// DaemonSet exists and parses, the whole argument list passes the binary's own
// validation, the probes and Services point at the ports the bind-address
// flags open, and the hub's RBAC covers every rule the hub hands to agents
// (the apiserver refuses to let the hub grant more than it holds).
//
// The tests render with bin/kubectl kustomize (`make tools`) and skip, saying
// so, when it is missing. They render a copy of the kustomizations whose agent
// overlays hold the placeholder hub.kubeconfig (KustomizeTree, also used by
// hack/image and the e2e suite): no overlay's hub.kubeconfig is in git. (sigs.k8s.io/kustomize/api is not a dependency of
// this module; kubectl embeds the same kustomize.)
package manifeststest
