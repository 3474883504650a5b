package framework

// The kind provider: a hub kind cluster and E2E_KIND_MEMBERS member kind
// clusters (sigs.k8s.io/kind's Go API), Flotilla's image built by hack/image
// (`make image`'s builder, no docker build) as a docker-archive and loaded
// into every node, the hub and agents
// installed from kustomize/, and an Environment exactly like the local
// provider's, so every spec runs unchanged. docs/e2e-kind.md describes the
// knobs and how each fault the specs inject maps to kind.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

const (
	// NodePorts of the Services the provider adds so the host reaches the
	// endpoints (through each node's extraPortMappings on 127.0.0.1).
	kindHubHealthNodePort    = 30081
	kindHubMetricsNodePort   = 30080
	kindHubDNSNodePort       = 30053
	kindAgentHealthNodePort  = 30181
	kindAgentMetricsNodePort = 30180
	kindMemberDNSNodePort    = 30153

	// kindAgentStoppedLabel on a member node keeps the agent Deployment's
	// pods off it: the provider adds a DoesNotExist node affinity on it to
	// the Deployment (one replica per node, kept apart by a required
	// anti-affinity the provider adds: the manifest's is only preferred), so
	// "stop agent-member1-0" is "label the node and delete its pod" (the
	// replacement stays Pending until "start" instead of joining another
	// node's agent).
	kindAgentStoppedLabel = "flotilla.io/e2e-agent-stopped"
	// kindReplicasAnnotation remembers the replicas of a Deployment the
	// provider scaled to zero ("stop coredns-member1", "stop hub").
	kindReplicasAnnotation = "flotilla.io/e2e-replicas"
	kindEndpointsService   = "flotilla-e2e-endpoints"
	// kindDNSProbeDaemonSet is the agent's per-node DNS probe
	// (manifests/agent), restarted with the agent on a reused cluster.
	kindDNSProbeDaemonSet = "flotilla-dns-probe"
	kindDNSService        = "flotilla-e2e-dns"
	kindHubDNSPort        = 5353
	kindAPIServerPort     = 6443
)

// kindFastHubFlags are what hack/local-up.sh passes the hub with FAST=1,
// which the specs' timings assume.
var kindFastHubFlags = []string{
	"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
	"--failover-eviction-timeout=20s", "--default-not-ready-toleration-seconds=5",
	"--default-unreachable-toleration-seconds=5", "--graceful-eviction-timeout=15s",
}

var kindRegions = []string{"region-a", "region-a", "region-b", "region-b", "region-c"}

// kindSettings are the provider's knobs (environment variables).
type kindSettings struct {
	Prefix    string // E2E_KIND_PREFIX: clusters are $PREFIX-hub, $PREFIX-member<i>
	Members   int    // E2E_KIND_MEMBERS
	Nodes     int    // E2E_KIND_NODES: nodes per member (one agent each)
	Image     string // E2E_KIND_IMAGE: the Flotilla image to build and load (REGISTRY/REPOSITORY:TAG)
	NodeImage string // E2E_KIND_NODE_IMAGE: kind node image ("" = kind's default)
	PortBase  int    // E2E_KIND_PORT_BASE: first host port on 127.0.0.1
	Build     bool   // E2E_KIND_BUILD=0 skips hack/image: the archive of an earlier run is loaded
	// StopCluster is how stop-cluster/start-cluster act: "apiserver"
	// (reject the apiserver port on the control-plane nodes; pods keep
	// running) or "nodes" (stop/start the node containers).
	StopCluster string // E2E_KIND_STOP_CLUSTER
	Keep        bool   // E2E_KEEP=1
}

func kindSettingsFromEnv(getenv func(string) string) (kindSettings, error) {
	s := kindSettings{Prefix: "flotilla-e2e", Members: 3, Nodes: 2, Image: "localhost/flotilla:e2e",
		PortBase: 28000, Build: true, StopCluster: "apiserver"}
	atoi := func(key string, dst *int, lo, hi int) error {
		v := getenv(key)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%s=%q: want a number from %d to %d", key, v, lo, hi)
		}
		*dst = n
		return nil
	}
	// Members need 3 for the specs (they use env.Members[2]); 9 keeps the
	// host port layout (100 ports per member) apart.
	if err := atoi("E2E_KIND_MEMBERS", &s.Members, 1, 9); err != nil {
		return s, err
	}
	// Two agents at least for the leader hand-over spec; 8 keeps each
	// node's 10 host ports inside its member's 100.
	if err := atoi("E2E_KIND_NODES", &s.Nodes, 1, 8); err != nil {
		return s, err
	}
	if err := atoi("E2E_KIND_PORT_BASE", &s.PortBase, 1024, 65535-1000); err != nil {
		return s, err
	}
	if v := getenv("E2E_KIND_PREFIX"); v != "" {
		s.Prefix = v
	}
	if v := getenv("E2E_KIND_IMAGE"); v != "" {
		s.Image = v
	}
	if strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image[strings.LastIndex(s.Image, "/")+1:], ":") {
		return s, fmt.Errorf("E2E_KIND_IMAGE=%q: give a tag other than latest (kubelet would try to pull it)", s.Image)
	}
	// hack/image wants the registry spelt out (no docker.io/library/ guessed).
	if _, err := name.NewTag(s.Image, name.StrictValidation); err != nil {
		return s, fmt.Errorf("E2E_KIND_IMAGE=%q: want REGISTRY/REPOSITORY:TAG, e.g. localhost/flotilla:e2e: %w", s.Image, err)
	}
	s.NodeImage = getenv("E2E_KIND_NODE_IMAGE")
	s.Build = getenv("E2E_KIND_BUILD") != "0"
	s.Keep = getenv("E2E_KEEP") == "1"
	if v := getenv("E2E_KIND_STOP_CLUSTER"); v != "" {
		if v != "apiserver" && v != "nodes" {
			return s, fmt.Errorf("E2E_KIND_STOP_CLUSTER=%q: want apiserver or nodes", v)
		}
		s.StopCluster = v
	}
	return s, nil
}

func (s kindSettings) hubCluster() string           { return s.Prefix + "-hub" }
func (s kindSettings) memberName(i int) string      { return fmt.Sprintf("member%d", i) }
func (s kindSettings) memberCluster(i int) string   { return s.Prefix + "-" + s.memberName(i) }
func (s kindSettings) region(i int) string          { return kindRegions[(i-1)%len(kindRegions)] }
func (s kindSettings) hubHealthPort() int           { return s.PortBase }
func (s kindSettings) hubMetricsPort() int          { return s.PortBase + 1 }
func (s kindSettings) hubDNSPort() int              { return s.PortBase + 53 }
func (s kindSettings) memberDNSPort(i int) int      { return s.PortBase + 100*i }
func (s kindSettings) agentHealthPort(i, a int) int { return s.PortBase + 100*i + 10 + 10*a }
func (s kindSettings) agentMetricsPort(i, a int) int {
	return s.PortBase + 100*i + 10 + 10*a + 1
}

// kindNodeName is the node (and container) name kind gives node a (0 is
// the control plane) of a cluster.
func kindNodeName(cluster string, a int) string {
	switch a {
	case 0:
		return cluster + "-control-plane"
	case 1:
		return cluster + "-worker"
	default:
		return fmt.Sprintf("%s-worker%d", cluster, a)
	}
}

func kindPortMapping(containerPort, hostPort int, proto kindv1alpha4.PortMappingProtocol) kindv1alpha4.PortMapping {
	return kindv1alpha4.PortMapping{ContainerPort: int32(containerPort), HostPort: int32(hostPort),
		ListenAddress: "127.0.0.1", Protocol: proto}
}

// hubClusterConfig is the hub's kind cluster: one node, the hub's health,
// metrics and DNS NodePorts published on 127.0.0.1.
func (s kindSettings) hubClusterConfig() *kindv1alpha4.Cluster {
	c := &kindv1alpha4.Cluster{TypeMeta: kindv1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name: s.hubCluster()}
	c.Nodes = []kindv1alpha4.Node{{Role: kindv1alpha4.ControlPlaneRole, ExtraPortMappings: []kindv1alpha4.PortMapping{
		kindPortMapping(kindHubHealthNodePort, s.hubHealthPort(), kindv1alpha4.PortMappingProtocolTCP),
		kindPortMapping(kindHubMetricsNodePort, s.hubMetricsPort(), kindv1alpha4.PortMappingProtocolTCP),
		kindPortMapping(kindHubDNSNodePort, s.hubDNSPort(), kindv1alpha4.PortMappingProtocolUDP),
	}}}
	return c
}

// memberClusterConfig is member i's kind cluster: s.Nodes nodes, all
// schedulable (the control plane is not tainted, so the agent pods, the DNS
// probe DaemonSet and the specs' workloads run on every node), labelled with the member's
// region and a zone like local's fake nodes; each publishes its agent's
// health and metrics NodePorts, the control plane also CoreDNS's.
func (s kindSettings) memberClusterConfig(i int) *kindv1alpha4.Cluster {
	c := &kindv1alpha4.Cluster{TypeMeta: kindv1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name: s.memberCluster(i)}
	region := s.region(i)
	for a := 0; a < s.Nodes; a++ {
		n := kindv1alpha4.Node{Role: kindv1alpha4.WorkerRole,
			Labels: map[string]string{
				"topology.kubernetes.io/region": region,
				"topology.kubernetes.io/zone":   fmt.Sprintf("%s-%d", region, a%2+1),
			},
			ExtraPortMappings: []kindv1alpha4.PortMapping{
				kindPortMapping(kindAgentHealthNodePort, s.agentHealthPort(i, a), kindv1alpha4.PortMappingProtocolTCP),
				kindPortMapping(kindAgentMetricsNodePort, s.agentMetricsPort(i, a), kindv1alpha4.PortMappingProtocolTCP),
			}}
		if a == 0 {
			n.Role = kindv1alpha4.ControlPlaneRole
			n.ExtraPortMappings = append(n.ExtraPortMappings,
				kindPortMapping(kindMemberDNSNodePort, s.memberDNSPort(i), kindv1alpha4.PortMappingProtocolUDP))
			n.KubeadmConfigPatches = []string{"kind: InitConfiguration\nnodeRegistration:\n  taints: []\n"}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

// kindRuntime is the container runtime kind drives: KIND_EXPERIMENTAL_PROVIDER
// (docker, podman, nerdctl) as kind's CLI reads it, else docker, else podman.
func kindRuntime(getenv func(string) string, lookPath func(string) (string, error)) (string, error) {
	if p := getenv("KIND_EXPERIMENTAL_PROVIDER"); p != "" {
		switch p {
		case "docker", "podman", "nerdctl":
		default:
			return "", fmt.Errorf("KIND_EXPERIMENTAL_PROVIDER=%q: want docker, podman or nerdctl", p)
		}
		if _, err := lookPath(p); err != nil {
			return "", fmt.Errorf("E2E_PROVIDER=kind: KIND_EXPERIMENTAL_PROVIDER=%s but %s is not in PATH: %w", p, p, err)
		}
		return p, nil
	}
	for _, bin := range []string{"docker", "podman"} {
		if _, err := lookPath(bin); err == nil {
			return bin, nil
		}
	}
	return "", errors.New("E2E_PROVIDER=kind needs a container runtime: neither docker nor podman is in PATH " +
		"(install one; for podman set KIND_EXPERIMENTAL_PROVIDER=podman); see docs/e2e-kind.md")
}

func kindProviderOption(runtime string) kindcluster.ProviderOption {
	switch runtime {
	case "podman":
		return kindcluster.ProviderWithPodman()
	case "nerdctl":
		return kindcluster.ProviderWithNerdctl("nerdctl")
	default:
		return kindcluster.ProviderWithDocker()
	}
}

// kindProvider implements Provider with kind clusters.
type kindProvider struct {
	root, stateDir string
	s              kindSettings
	runtime        string
	kind           *kindcluster.Provider
	kubectl        string
}

func newKindProvider(root string) (*kindProvider, error) {
	s, err := kindSettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return &kindProvider{root: root, s: s, stateDir: filepath.Join(root, ".local", "e2e-kind")}, nil
}

func (p *kindProvider) clusters() []string {
	names := []string{p.s.hubCluster()}
	for i := 1; i <= p.s.Members; i++ {
		names = append(names, p.s.memberCluster(i))
	}
	return names
}

// preflight fails fast, before anything is created, on a missing runtime,
// a runtime that does not answer, or missing tools and manifests.
func (p *kindProvider) preflight(ctx context.Context) error {
	rt, err := kindRuntime(os.Getenv, exec.LookPath)
	if err != nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ictx, rt, "info").CombinedOutput(); err != nil {
		return fmt.Errorf("E2E_PROVIDER=kind: `%s info` failed (is the %s daemon running and may this user use it?): %w\n%s",
			rt, rt, err, strings.TrimSpace(string(out)))
	}
	p.runtime = rt
	p.kind = kindcluster.NewProvider(kindProviderOption(rt))
	p.kubectl = filepath.Join(p.root, "bin", "kubectl")
	if _, err := os.Stat(p.kubectl); err != nil {
		if p.kubectl, err = exec.LookPath("kubectl"); err != nil {
			return errors.New("E2E_PROVIDER=kind: no kubectl in bin/ (make tools) or PATH")
		}
	}
	for _, f := range []string{"hack/image/main.go", "bin/hub", "kustomize/hub/kustomization.yaml", "hack/agent-overlay.sh"} {
		if _, err := os.Stat(filepath.Join(p.root, f)); err != nil {
			return fmt.Errorf("E2E_PROVIDER=kind: %s missing (bin/hub: make build): %w", f, err)
		}
	}
	if !p.s.Build {
		if _, err := os.Stat(p.imageArchive()); err != nil {
			return fmt.Errorf("E2E_PROVIDER=kind: E2E_KIND_BUILD=0 but no image archive from an earlier run: %w", err)
		}
	}
	return nil
}

func (p *kindProvider) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, ">> kind: "+format+"\n", args...)
}

func (p *kindProvider) Up(ctx context.Context) (env *Environment, err error) {
	if err := p.preflight(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (the suite gives BeforeSuite 5 minutes: with E2E_KEEP=1 a later run reuses the clusters made so far)", err)
		}
	}()
	if err := os.MkdirAll(filepath.Join(p.stateDir, "kind"), 0o755); err != nil {
		return nil, err
	}

	// The image builds while the clusters come up.
	var wg sync.WaitGroup
	errs := make([]error, len(p.clusters())+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = p.buildImage(ctx)
	}()
	existing, err := p.kind.List()
	if err != nil {
		return nil, fmt.Errorf("kind: listing clusters: %w", err)
	}
	for n, name := range p.clusters() {
		cfg := p.s.hubClusterConfig()
		if n > 0 {
			cfg = p.s.memberClusterConfig(n)
		}
		if contains(existing, name) {
			p.logf("reusing cluster %s", name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.logf("creating cluster %s", name)
			opts := []kindcluster.CreateOption{kindcluster.CreateWithV1Alpha4Config(cfg),
				kindcluster.CreateWithWaitForReady(3 * time.Minute),
				kindcluster.CreateWithKubeconfigPath(filepath.Join(p.stateDir, "kind", name+".kubeconfig")),
				kindcluster.CreateWithDisplayUsage(false), kindcluster.CreateWithDisplaySalutation(false)}
			if p.s.NodeImage != "" {
				opts = append(opts, kindcluster.CreateWithNodeImage(p.s.NodeImage))
			}
			if err := p.kind.Create(name, opts...); err != nil {
				errs[n+1] = fmt.Errorf("kind create cluster %s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := p.loadImage(); err != nil {
		return nil, err
	}
	if err := p.writeKubeconfigs(); err != nil {
		return nil, err
	}
	env, err = p.install(ctx)
	if err != nil {
		return nil, err
	}
	return env, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// imageArchive is the docker-archive of the image the nodes load; kept
// after the run, so E2E_KIND_BUILD=0 loads it again.
func (p *kindProvider) imageArchive() string { return filepath.Join(p.stateDir, "image.tar") }

// imageBuildArgs is the command that builds the image into archive: the
// one recipe `make image` runs (hack/image), the host's platform, tagged
// with the name the rendered manifests use.
func imageBuildArgs(image, archive string) []string {
	return []string{"go", "run", "./hack/image", "--image", image, "--tarball", archive}
}

// buildImage builds the image without a container runtime (hack/image);
// loadImage imports it into the nodes.
func (p *kindProvider) buildImage(ctx context.Context) error {
	if !p.s.Build {
		p.logf("E2E_KIND_BUILD=0: loading %s as built before", p.imageArchive())
		return nil
	}
	p.logf("building %s with hack/image", p.s.Image)
	if err := os.MkdirAll(filepath.Dir(p.imageArchive()), 0o755); err != nil {
		return err
	}
	args := imageBuildArgs(p.s.Image, p.imageArchive())
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = p.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(out, 40))
	}
	return nil
}

func tail(out []byte, lines int) string {
	l := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// loadImage is `kind load image-archive`: import hack/image's
// docker-archive into every node's containerd.
func (p *kindProvider) loadImage() error {
	archive := p.imageArchive()
	for _, name := range p.clusters() {
		ns, err := p.kind.ListInternalNodes(name)
		if err != nil {
			return fmt.Errorf("kind: nodes of %s: %w", name, err)
		}
		for _, n := range ns {
			f, err := os.Open(archive)
			if err != nil {
				return err
			}
			err = nodeutils.LoadImageArchive(n, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("loading %s into %s: %w", p.s.Image, n.String(), err)
			}
		}
	}
	return nil
}

// mergeKubeconfigs merges one kind kubeconfig per cluster into one whose
// contexts are named after the clusters (like local's $PREFIX-hub).
func mergeKubeconfigs(byCluster map[string][]byte, current string) (*clientcmdapi.Config, error) {
	out := clientcmdapi.NewConfig()
	names := make([]string, 0, len(byCluster))
	for name := range byCluster {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg, err := clientcmd.Load(byCluster[name])
		if err != nil {
			return nil, fmt.Errorf("kubeconfig of %s: %w", name, err)
		}
		ctx, ok := cfg.Contexts[cfg.CurrentContext]
		if !ok {
			return nil, fmt.Errorf("kubeconfig of %s has no current context", name)
		}
		cl, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		if cl == nil || user == nil {
			return nil, fmt.Errorf("kubeconfig of %s: context %s lacks its cluster or user", name, cfg.CurrentContext)
		}
		out.Clusters[name], out.AuthInfos[name] = cl, user
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	out.CurrentContext = current
	return out, nil
}

// minify keeps one context of cfg.
func minify(cfg *clientcmdapi.Config, context string) *clientcmdapi.Config {
	c := cfg.DeepCopy()
	c.CurrentContext = context
	if err := clientcmdapi.MinifyConfig(c); err != nil {
		return cfg
	}
	return c
}

func (p *kindProvider) kubeconfigPath() string { return filepath.Join(p.stateDir, "kubeconfig") }

func (p *kindProvider) writeKubeconfigs() error {
	raw := map[string][]byte{}
	for _, name := range p.clusters() {
		kc, err := p.kind.KubeConfig(name, false)
		if err != nil {
			return fmt.Errorf("kind get kubeconfig %s: %w", name, err)
		}
		raw[name] = []byte(kc)
	}
	merged, err := mergeKubeconfigs(raw, p.s.hubCluster())
	if err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*merged, p.kubeconfigPath()); err != nil {
		return err
	}
	// The layout LoadEnvironment expects: hub.kubeconfig (what the specs'
	// extra agent on the host uses) and <member>/kubeconfig.
	if err := clientcmd.WriteToFile(*minify(merged, p.s.hubCluster()), filepath.Join(p.stateDir, "hub.kubeconfig")); err != nil {
		return err
	}
	for i := 1; i <= p.s.Members; i++ {
		dir := filepath.Join(p.stateDir, p.s.memberName(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*minify(merged, p.s.memberCluster(i)), filepath.Join(dir, "kubeconfig")); err != nil {
			return err
		}
	}
	return nil
}

func (p *kindProvider) kubectlCmd(ctx context.Context, context string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, p.kubectl, append([]string{"--kubeconfig", p.kubeconfigPath(), "--context", context}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl --context %s %s: %w\n%s", context, strings.Join(args, " "), err, tail(out, 20))
	}
	return out, nil
}

// kindWorkload is what the provider learnt of a rendered Flotilla
// Deployment (hub, agent).
type kindWorkload struct {
	Kind, Namespace, Name            string
	Selector                         map[string]string
	HealthPort, MetricsPort, DNSPort int
}

// isFlotillaContainer tells Flotilla's containers from others: the image's
// name mentions flotilla, or the command is one of the image's binaries.
func isFlotillaContainer(c corev1.Container) bool {
	name := c.Image
	if i := strings.IndexAny(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	if strings.Contains(name[strings.LastIndex(name, "/")+1:], "flotilla") {
		return true
	}
	return len(c.Command) > 0 && (c.Command[0] == "/hub" || c.Command[0] == "/agent")
}

// flagValue finds --name=value or --name value in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// setFlag replaces --name in args (either form) or appends --name=value.
func setFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		if strings.HasPrefix(args[i], "--"+name+"=") {
			continue
		}
		if args[i] == "--"+name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return append(out, "--"+name+"="+value)
}

// ensureAddress makes sure a bind-address flag is set and not "0"; it
// returns the port it serves on.
func ensureAddress(c *corev1.Container, flag string, def int) (int, error) {
	v, ok := flagValue(append(append([]string{}, c.Command...), c.Args...), flag)
	if !ok || v == "" || v == "0" {
		v = fmt.Sprintf(":%d", def)
		c.Args = setFlag(c.Args, flag, v)
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return 0, fmt.Errorf("--%s=%s: %w", flag, v, err)
	}
	return strconv.Atoi(port)
}

// renderForKind rewrites the manifests `kubectl kustomize` rendered for the
// kind environment: Flotilla's containers run image (IfNotPresent, it is
// loaded, not pulled) with health and metrics served (and, for the hub, the
// DNS traffic manager and local's FAST timings); the hub runs one replica
// (the specs read the leader's metrics through one address); the agent
// Deployment runs agentReplicas (one per node, as the environment lists an
// agent per node) and keeps off nodes labelled kindAgentStoppedLabel. Other
// Flotilla workloads (the agent's DNS probe DaemonSet) only get the image.
// It returns the manifests and the Deployment of the component.
func renderForKind(manifests []byte, component, image string, agentReplicas int) ([]byte, *kindWorkload, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var out bytes.Buffer
	var found *kindWorkload
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, nil, err
		}
		var obj any
		var spec *corev1.PodSpec
		var w kindWorkload
		switch {
		case head.Kind == "Deployment" && component == "hub":
			d := &appsv1.Deployment{}
			if err := yaml.Unmarshal(doc, d); err != nil {
				return nil, nil, err
			}
			obj, spec = d, &d.Spec.Template.Spec
			one := int32(1)
			d.Spec.Replicas = &one
			w = kindWorkload{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name}
			if d.Spec.Selector != nil {
				w.Selector = d.Spec.Selector.MatchLabels
			}
		case head.Kind == "Deployment" && component == "agent":
			d := &appsv1.Deployment{}
			if err := yaml.Unmarshal(doc, d); err != nil {
				return nil, nil, err
			}
			// The agent's Deployment runs /agent (the hub's image runs
			// /hub by default).
			if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
				return isFlotillaContainer(c) && len(c.Command) > 0 && c.Command[0] == "/agent"
			}) {
				break
			}
			obj, spec = d, &d.Spec.Template.Spec
			replicas := int32(agentReplicas)
			d.Spec.Replicas = &replicas
			keepOffStopped(spec)
			w = kindWorkload{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name}
			if d.Spec.Selector != nil {
				w.Selector = d.Spec.Selector.MatchLabels
			}
			onePerNode(d, w.Selector)
		case head.Kind == "DaemonSet" && component == "agent":
			// The DNS probe: Flotilla's image, nothing else changes.
			ds := &appsv1.DaemonSet{}
			if err := yaml.Unmarshal(doc, ds); err != nil {
				return nil, nil, err
			}
			changed := false
			for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.Containers, ds.Spec.Template.Spec.InitContainers} {
				for i := range cs {
					if isFlotillaContainer(cs[i]) {
						cs[i].Image, cs[i].ImagePullPolicy = image, corev1.PullIfNotPresent
						changed = true
					}
				}
			}
			if changed {
				if doc, err = yaml.Marshal(ds); err != nil {
					return nil, nil, err
				}
			}
		}
		ours := false
		if spec != nil {
			for i := range spec.Containers {
				c := &spec.Containers[i]
				if !isFlotillaContainer(*c) {
					continue
				}
				ours = true
				c.Image, c.ImagePullPolicy = image, corev1.PullIfNotPresent
				if w.HealthPort, err = ensureAddress(c, "health-probe-bind-address", 10357); err != nil {
					return nil, nil, err
				}
				if w.MetricsPort, err = ensureAddress(c, "metrics-bind-address", 8080); err != nil {
					return nil, nil, err
				}
				if component == "hub" {
					if w.DNSPort, err = ensureAddress(c, "dns-traffic-address", kindHubDNSPort); err != nil {
						return nil, nil, err
					}
					for _, f := range kindFastHubFlags {
						name, value, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
						c.Args = setFlag(c.Args, name, value)
					}
				}
			}
			for i := range spec.InitContainers {
				if isFlotillaContainer(spec.InitContainers[i]) {
					spec.InitContainers[i].Image, spec.InitContainers[i].ImagePullPolicy = image, corev1.PullIfNotPresent
				}
			}
		}
		if ours {
			if found != nil {
				return nil, nil, fmt.Errorf("more than one Flotilla %s in the %s manifests (%s, %s)", w.Kind, component, found.Name, w.Name)
			}
			if w.Namespace == "" || len(w.Selector) == 0 {
				return nil, nil, fmt.Errorf("%s %s: needs a namespace and matchLabels", w.Kind, w.Name)
			}
			found = &w
			if doc, err = yaml.Marshal(obj); err != nil {
				return nil, nil, err
			}
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimSpace(doc))
		out.WriteString("\n")
	}
	if found == nil {
		return nil, nil, fmt.Errorf("the %s manifests hold no Deployment running Flotilla's image", component)
	}
	return out.Bytes(), found, nil
}

// keepOffStopped adds "kindAgentStoppedLabel DoesNotExist" to every
// required node selector term (or one term with it alone).
func keepOffStopped(spec *corev1.PodSpec) {
	req := corev1.NodeSelectorRequirement{Key: kindAgentStoppedLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		terms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
}

// onePerNode keeps the agent's pods on distinct nodes, as the provider's
// node-named agents ("agent-member1-0") need: a required anti-affinity on
// the hostname selecting the Deployment's pods, in place of the manifest's
// preferred one (which lets a one-node member run both pods), and a rolling
// update that replaces a pod in place (no surge pod, which would find no
// free node when there is one replica per node).
func onePerNode(d *appsv1.Deployment, selector map[string]string) {
	spec := &d.Spec.Template.Spec
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.PodAntiAffinity == nil {
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	paa := spec.Affinity.PodAntiAffinity
	paa.PreferredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(paa.PreferredDuringSchedulingIgnoredDuringExecution,
		func(t corev1.WeightedPodAffinityTerm) bool {
			return t.PodAffinityTerm.TopologyKey == corev1.LabelHostname
		})
	if len(paa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		paa.PreferredDuringSchedulingIgnoredDuringExecution = nil
	}
	if !slices.ContainsFunc(paa.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return t.TopologyKey == corev1.LabelHostname
	}) {
		paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		})
	}
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one}}
}

// kindServices are the NodePort Services through which the host reaches a
// workload: health and metrics (and the hub's DNS). Agents' Service keeps
// traffic on the node it arrives at, so each node's host ports reach that
// node's agent.
func kindServices(w *kindWorkload, component string) []*corev1.Service {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: kindEndpointsService, Namespace: w.Namespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: w.Selector}}
	port := func(name string, port, nodePort int, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: int32(port), TargetPort: intstr.FromInt32(int32(port)), NodePort: int32(nodePort)}
	}
	switch component {
	case "hub":
		svc.Spec.Ports = []corev1.ServicePort{
			port("health", w.HealthPort, kindHubHealthNodePort, corev1.ProtocolTCP),
			port("metrics", w.MetricsPort, kindHubMetricsNodePort, corev1.ProtocolTCP),
			port("dns", w.DNSPort, kindHubDNSNodePort, corev1.ProtocolUDP),
		}
	default:
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.Ports = []corev1.ServicePort{
			port("health", w.HealthPort, kindAgentHealthNodePort, corev1.ProtocolTCP),
			port("metrics", w.MetricsPort, kindAgentMetricsNodePort, corev1.ProtocolTCP),
		}
	}
	return []*corev1.Service{svc}
}

// kindDNSService exposes a member's CoreDNS on a NodePort (UDP).
func kindMemberDNSService() *corev1.Service {
	return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: kindDNSService, Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53,
				TargetPort: intstr.FromInt32(53), NodePort: kindMemberDNSNodePort}}}}
}

func applyService(ctx context.Context, kube kubernetes.Interface, svc *corev1.Service) error {
	data, err := json.Marshal(svc)
	if err != nil {
		return err
	}
	force := true
	_, err = kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "flotilla-e2e", Force: &force})
	return err
}

// kindClusterObjects are the hub's Cluster objects, as local-up.sh makes them.
func (s kindSettings) clusterObjects() []byte {
	var b strings.Builder
	for i := 1; i <= s.Members; i++ {
		r := s.region(i)
		fmt.Fprintf(&b, `---
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels:
    flotilla.io/environment: e2e-kind
spec:
  syncMode: Pull
  provider: kind
  region: %s
  zones: [%s-1, %s-2]
`, s.memberName(i), r, r, r)
	}
	return []byte(b.String())
}

// hubServer is the hub apiserver as member nodes reach it: the hub node's
// address on the kind network (no DNS involved, so a member whose CoreDNS
// the specs stop still reaches its hub).
func hubServer(ip string) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(kindAPIServerPort))
}

func (p *kindProvider) install(ctx context.Context) (*Environment, error) {
	hubCtx := p.s.hubCluster()
	p.logf("installing the hub kustomization")
	rendered, err := p.kubectlCmd(ctx, hubCtx, nil, "kustomize", filepath.Join(p.root, "kustomize", "hub"))
	if err != nil {
		return nil, err
	}
	hubManifests, hub, err := renderForKind(rendered, "hub", p.s.Image, 0)
	if err != nil {
		return nil, fmt.Errorf("kustomize/hub: %w", err)
	}
	if _, err := p.kubectlCmd(ctx, hubCtx, hubManifests, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		return nil, err
	}
	if _, err := p.kubectlCmd(ctx, hubCtx, nil, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all"); err != nil {
		return nil, err
	}
	if _, err := p.kubectlCmd(ctx, hubCtx, p.s.clusterObjects(), "apply", "-f", "-"); err != nil {
		return nil, err
	}
	hubKube, err := p.kube(hubCtx)
	if err != nil {
		return nil, err
	}
	for _, svc := range kindServices(hub, "hub") {
		if err := applyService(ctx, hubKube, svc); err != nil {
			return nil, fmt.Errorf("hub endpoints Service: %w", err)
		}
	}
	// Restart so a rebuilt image under the same tag runs on a reused cluster.
	if err := rolloutRestart(ctx, hubKube, hub, true); err != nil {
		return nil, fmt.Errorf("hub rollout: %w", err)
	}

	hubNodes, err := p.kind.ListInternalNodes(p.s.hubCluster())
	if err != nil || len(hubNodes) == 0 {
		return nil, fmt.Errorf("kind: nodes of %s: %v", p.s.hubCluster(), err)
	}
	hubIP, _, err := hubNodes[0].IP()
	if err != nil || hubIP == "" {
		return nil, fmt.Errorf("kind: address of %s: %v", hubNodes[0], err)
	}

	agents := make([]*kindWorkload, p.s.Members+1)
	for i := 1; i <= p.s.Members; i++ {
		name, memberCtx := p.s.memberName(i), p.s.memberCluster(i)
		dir := filepath.Join(p.stateDir, name)
		p.logf("%s: agent identity, overlay, agents", name)
		agentKubeconfig := filepath.Join(dir, "hub-agent.kubeconfig")
		cmd := exec.CommandContext(ctx, filepath.Join(p.root, "bin", "hub"), "agent-kubeconfig",
			"--kubeconfig", filepath.Join(p.stateDir, "hub.kubeconfig"), "--cluster", name,
			"--server", hubServer(hubIP), "--duration", "8760h", "--wait", "120s")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		kc, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("hub agent-kubeconfig --cluster %s: %w\n%s", name, err, stderr.String())
		}
		if err := os.WriteFile(agentKubeconfig, kc, 0o600); err != nil {
			return nil, err
		}
		ov := exec.CommandContext(ctx, filepath.Join(p.root, "hack", "agent-overlay.sh"), name, agentKubeconfig)
		ov.Dir = p.root
		if out, err := ov.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("hack/agent-overlay.sh %s: %w\n%s", name, err, tail(out, 20))
		}
		rendered, err := p.kubectlCmd(ctx, memberCtx, nil, "kustomize", filepath.Join(p.root, "kustomize", "agent", "overlays", name))
		if err != nil {
			return nil, err
		}
		manifests, agent, err := renderForKind(rendered, "agent", p.s.Image, p.s.Nodes)
		if err != nil {
			return nil, fmt.Errorf("kustomize/agent/overlays/%s: %w", name, err)
		}
		agents[i] = agent
		if _, err := p.kubectlCmd(ctx, memberCtx, manifests, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
			return nil, err
		}
		kube, err := p.kube(memberCtx)
		if err != nil {
			return nil, err
		}
		for _, svc := range append(kindServices(agent, "agent"), kindMemberDNSService()) {
			if err := applyService(ctx, kube, svc); err != nil {
				return nil, fmt.Errorf("%s: Service %s: %w", name, svc.Name, err)
			}
		}
		if err := rolloutRestart(ctx, kube, agent, false); err != nil {
			return nil, fmt.Errorf("%s: agent rollout: %w", name, err)
		}
		probe := &kindWorkload{Kind: "DaemonSet", Namespace: agent.Namespace, Name: kindDNSProbeDaemonSet}
		if err := rolloutRestart(ctx, kube, probe, false); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: DNS probe rollout: %w", name, err)
		}
	}

	env, err := p.environment()
	if err != nil {
		return nil, err
	}
	p.logf("waiting for every Cluster to be Ready and every endpoint to answer")
	if err := p.waitReady(ctx, env); err != nil {
		return nil, err
	}
	env.ctl = (&kindController{p: p, env: env, hub: hub, agents: agents}).Ctl
	return env, nil
}

func (p *kindProvider) kube(context string) (kubernetes.Interface, error) {
	e := &Environment{Kubeconfig: p.kubeconfigPath(), Timings: DefaultTimings()}
	return e.Kube(context)
}

// environment writes the environment file local-up.sh would and reads it
// back, so both providers fill Environment the same way.
func (p *kindProvider) environment() (*Environment, error) {
	path := filepath.Join(p.stateDir, "environment")
	if err := os.WriteFile(path, p.s.environmentFile(p.stateDir, p.kubeconfigPath()), 0o644); err != nil {
		return nil, err
	}
	env, err := LoadEnvironment(path)
	if err != nil {
		return nil, fmt.Errorf("kind provider: %w", err)
	}
	return env, nil
}

// environmentFile is the KEY=VALUE file LoadEnvironment reads. CTL is
// empty: Ctl is the kind controller, not a script.
func (s kindSettings) environmentFile(stateDir, kubeconfig string) []byte {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	kv("KUBECONFIG", kubeconfig)
	kv("STATE_DIR", stateDir)
	kv("PREFIX", s.Prefix)
	kv("CTL", "")
	kv("HUB_CONTEXT", s.hubCluster())
	kv("HUB_HEALTH", fmt.Sprintf("127.0.0.1:%d", s.hubHealthPort()))
	kv("HUB_METRICS", fmt.Sprintf("127.0.0.1:%d", s.hubMetricsPort()))
	kv("HUB_DNS", fmt.Sprintf("127.0.0.1:%d", s.hubDNSPort()))
	kv("MEMBERS", s.Members)
	for i := 1; i <= s.Members; i++ {
		p := fmt.Sprintf("MEMBER%d_", i)
		var agents, nodes, health, metrics []string
		for a := 0; a < s.Nodes; a++ {
			agents = append(agents, fmt.Sprintf("agent-%s-%d", s.memberName(i), a))
			nodes = append(nodes, kindNodeName(s.memberCluster(i), a))
			health = append(health, fmt.Sprintf("127.0.0.1:%d", s.agentHealthPort(i, a)))
			metrics = append(metrics, fmt.Sprintf("127.0.0.1:%d", s.agentMetricsPort(i, a)))
		}
		kv(p+"NAME", s.memberName(i))
		kv(p+"CONTEXT", s.memberCluster(i))
		kv(p+"DNS", fmt.Sprintf("127.0.0.1:%d", s.memberDNSPort(i)))
		kv(p+"AGENTS", strings.Join(agents, " "))
		kv(p+"AGENT_NODES", strings.Join(nodes, " "))
		kv(p+"AGENT_HEALTH", strings.Join(health, " "))
		kv(p+"AGENT_METRICS", strings.Join(metrics, " "))
	}
	return []byte(b.String())
}

func (p *kindProvider) waitReady(ctx context.Context, env *Environment) error {
	cfg, err := env.RestConfig(env.HubContext)
	if err != nil {
		return err
	}
	flotilla, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var notReady []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		notReady = nil
		for _, m := range env.Members {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil || !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				notReady = append(notReady, m.Name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("clusters not Ready: %v: %w", notReady, err)
	}
	endpoints := []string{env.HubHealth}
	for _, m := range env.Members {
		endpoints = append(endpoints, m.AgentHealth...)
	}
	for _, e := range endpoints {
		if err := waitHTTP(ctx, e, "/readyz", 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

func waitHTTP(ctx context.Context, hostport, path string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", hostport)
		if err != nil {
			last = err
			return false, nil
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, hostport)
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			last = fmt.Errorf("GET %s%s: %q %v", hostport, path, strings.TrimSpace(line), err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s%s not ready: %v (%w)", hostport, path, last, err)
	}
	return nil
}

func (p *kindProvider) Down(ctx context.Context) error {
	if p.s.Keep {
		return nil
	}
	if p.kind == nil {
		return nil // Up failed its preflight: it created nothing
	}
	var errs []error
	for _, name := range p.clusters() {
		if err := p.kind.Delete(name, filepath.Join(p.stateDir, "kind", name+".kubeconfig")); err != nil {
			errs = append(errs, fmt.Errorf("kind delete cluster %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// kindTarget is what an Environment.Ctl name means in the kind environment.
type kindTarget struct {
	Kind    string // hub, agent, coredns, cluster
	Member  int    // agent, coredns: 1-based member index
	Node    string // agent: the node whose agent pod it is
	Cluster string // cluster: the kind cluster
}

// kindCtlTarget maps an action and a name the specs pass Environment.Ctl
// to what the kind controller acts on.
func kindCtlTarget(env *Environment, action, name string) (kindTarget, error) {
	switch action {
	case "stop-cluster", "start-cluster":
		if name == env.Prefix+"-hub" {
			return kindTarget{Kind: "cluster", Cluster: name}, nil
		}
		for i, m := range env.Members {
			if name == env.ClusterName(m) {
				return kindTarget{Kind: "cluster", Cluster: name, Member: i + 1}, nil
			}
		}
		return kindTarget{}, fmt.Errorf("%s %s: no such cluster in this environment", action, name)
	case "stop", "kill", "start", "restart":
	default:
		return kindTarget{}, fmt.Errorf("%s %s: unknown action (stop, kill, start, restart, stop-cluster, start-cluster)", action, name)
	}
	if name == "hub" {
		return kindTarget{Kind: "hub"}, nil
	}
	for i, m := range env.Members {
		if name == "coredns-"+m.Name {
			return kindTarget{Kind: "coredns", Member: i + 1}, nil
		}
		for a, agent := range m.Agents {
			if name == agent && a < len(m.AgentNodes) {
				return kindTarget{Kind: "agent", Member: i + 1, Node: m.AgentNodes[a]}, nil
			}
		}
	}
	return kindTarget{}, fmt.Errorf("%s %s: no such process in this environment (hub, agent-<member>-<i>, coredns-<member>)", action, name)
}

// kindController carries out Environment.Ctl in a kind environment.
type kindController struct {
	p      *kindProvider
	env    *Environment
	hub    *kindWorkload
	agents []*kindWorkload // by member index (1-based)
}

var corednsWorkload = &kindWorkload{Kind: "Deployment", Namespace: "kube-system", Name: "coredns",
	Selector: map[string]string{"k8s-app": "kube-dns"}}

func (c *kindController) Ctl(ctx context.Context, action, name string) error {
	t, err := kindCtlTarget(c.env, action, name)
	if err != nil {
		return err
	}
	err = c.do(ctx, action, t)
	if err != nil {
		return fmt.Errorf("kind: %s %s: %w", action, name, err)
	}
	return nil
}

func (c *kindController) do(ctx context.Context, action string, t kindTarget) error {
	if t.Kind == "cluster" {
		if action == "stop-cluster" {
			return c.stopCluster(ctx, t.Cluster)
		}
		return c.startCluster(ctx, t.Cluster)
	}
	context := c.env.HubContext
	if t.Member > 0 {
		context = c.env.Members[t.Member-1].Context
	}
	kube, err := c.env.Kube(context)
	if err != nil {
		return err
	}
	switch t.Kind {
	case "agent":
		w := c.agents[t.Member]
		switch action {
		case "stop", "kill":
			return stopAgent(ctx, kube, w, t.Node, action == "kill")
		case "start":
			return startAgent(ctx, kube, w, t.Node)
		default:
			if err := stopAgent(ctx, kube, w, t.Node, false); err != nil {
				return err
			}
			return startAgent(ctx, kube, w, t.Node)
		}
	default: // hub, coredns: Deployments
		w := c.hub
		if t.Kind == "coredns" {
			w = corednsWorkload
		}
		switch action {
		case "stop", "kill":
			return scaleDown(ctx, kube, w, action == "kill")
		case "start":
			return scaleUp(ctx, kube, w)
		default:
			return rolloutRestart(ctx, kube, w, true)
		}
	}
}

func podsOf(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, node string) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(w.Selector).String()}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	l, err := kube.CoreV1().Pods(w.Namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// deletePods deletes the pods (at once with kill: SIGKILL, no grace) and
// waits until they are gone.
func deletePods(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, node string, kill bool) error {
	pods, err := podsOf(ctx, kube, w, node)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if kill {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	for _, pod := range pods {
		if err := kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, kube, w, node)
		return err == nil && len(pods) == 0, nil
	})
}

func patchNodeLabel(ctx context.Context, kube kubernetes.Interface, node string, value *string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{kindAgentStoppedLabel: value}}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// stopAgent labels the node so no agent pod runs there, and deletes the
// node's agent pod (kill: without grace); its replacement stays Pending.
func stopAgent(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, node string, kill bool) error {
	stopped := "true"
	if err := patchNodeLabel(ctx, kube, node, &stopped); err != nil {
		return err
	}
	return deletePods(ctx, kube, w, node, kill)
}

// startAgent lets an agent pod run on the node again (a Pending replacement
// is scheduled there) and waits until it runs (not until it is ready: a
// started process need not be).
func startAgent(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, node string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, stopped := n.Labels[kindAgentStoppedLabel]; !stopped {
		return fmt.Errorf("the agent on %s is already running", node)
	}
	if err := patchNodeLabel(ctx, kube, node, nil); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, kube, w, node)
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return true, nil
			}
		}
		return false, nil
	})
}

func scaleDown(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, kill bool) error {
	d, err := kube.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas > 0 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"replicas":0}}`, kindReplicasAnnotation, strconv.Itoa(int(*d.Spec.Replicas)))
		if _, err := kube.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return deletePods(ctx, kube, w, "", kill)
}

func scaleUp(ctx context.Context, kube kubernetes.Interface, w *kindWorkload) error {
	d, err := kube.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 {
		return fmt.Errorf("%s/%s is already running", w.Namespace, w.Name)
	}
	replicas := 1
	if n, err := strconv.Atoi(d.Annotations[kindReplicasAnnotation]); err == nil && n > 0 {
		replicas = n
	}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := kube.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	return waitRollout(ctx, kube, w)
}

// rolloutRestart is `kubectl rollout restart`, waiting for the rollout
// when wait is set.
func rolloutRestart(ctx context.Context, kube kubernetes.Interface, w *kindWorkload, wait bool) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	var err error
	if w.Kind == "DaemonSet" {
		_, err = kube.AppsV1().DaemonSets(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	} else {
		_, err = kube.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	if err != nil || !wait {
		return err
	}
	return waitRollout(ctx, kube, w)
}

// waitRollout waits until a Deployment's current pods are all available.
func waitRollout(ctx context.Context, kube kubernetes.Interface, w *kindWorkload) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil {
			return false, nil
		}
		st := d.Status
		return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == *d.Spec.Replicas &&
			st.Replicas == *d.Spec.Replicas && st.AvailableReplicas == *d.Spec.Replicas, nil
	})
}

// kindRejectRule is the iptables rule that takes a node's apiserver away:
// every connection to it, established ones too, is reset.
var kindRejectRule = []string{"INPUT", "-p", "tcp", "--dport", strconv.Itoa(kindAPIServerPort), "-j", "REJECT", "--reject-with", "tcp-reset"}

func nodeRun(n nodes.Node, args ...string) error {
	lines, err := kindexec.CombinedOutputLines(n.Command(args[0], args[1:]...))
	if err != nil {
		return fmt.Errorf("%s on %s: %w: %s", strings.Join(args, " "), n, err, strings.Join(lines, "\n"))
	}
	return nil
}

func (c *kindController) controlPlanes(cluster string) ([]nodes.Node, error) {
	all, err := c.p.kind.ListInternalNodes(cluster)
	if err != nil {
		return nil, err
	}
	var cps []nodes.Node
	for _, n := range all {
		if role, err := n.Role(); err == nil && role == "control-plane" {
			cps = append(cps, n)
		}
	}
	if len(cps) == 0 {
		return nil, fmt.Errorf("no control-plane node in %s", cluster)
	}
	return cps, nil
}

// stopCluster takes a cluster's apiserver away: by default its port is
// rejected on the control-plane node (the apiserver, etcd and every pod go
// on running, like local's agents outside a stopped kwok cluster); with
// E2E_KIND_STOP_CLUSTER=nodes the node containers are stopped.
func (c *kindController) stopCluster(ctx context.Context, cluster string) error {
	if c.p.s.StopCluster == "nodes" {
		return c.runtimeNodes(ctx, "stop", cluster)
	}
	cps, err := c.controlPlanes(cluster)
	if err != nil {
		return err
	}
	for _, n := range cps {
		check := append([]string{"iptables", "-C"}, kindRejectRule...)
		if nodeRun(n, check...) == nil {
			continue // already stopped
		}
		insert := append([]string{"iptables", "-I"}, kindRejectRule[0], "1")
		if err := nodeRun(n, append(insert, kindRejectRule[1:]...)...); err != nil {
			return err
		}
	}
	return nil
}

func (c *kindController) startCluster(ctx context.Context, cluster string) error {
	if c.p.s.StopCluster == "nodes" {
		if err := c.runtimeNodes(ctx, "start", cluster); err != nil {
			return err
		}
	} else {
		cps, err := c.controlPlanes(cluster)
		if err != nil {
			return err
		}
		for _, n := range cps {
			for nodeRun(n, append([]string{"iptables", "-C"}, kindRejectRule...)...) == nil {
				if err := nodeRun(n, append([]string{"iptables", "-D"}, kindRejectRule...)...); err != nil {
					return err
				}
			}
		}
	}
	// Like kwokctl start cluster --wait 120s: back when the apiserver is ready.
	kube, err := c.env.Kube(cluster)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 120*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	})
}

func (c *kindController) runtimeNodes(ctx context.Context, verb, cluster string) error {
	all, err := c.p.kind.ListNodes(cluster)
	if err != nil {
		return err
	}
	args := []string{verb}
	for _, n := range all {
		args = append(args, n.String())
	}
	if out, err := exec.CommandContext(ctx, c.p.runtime, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", c.p.runtime, strings.Join(args, " "), err, tail(out, 20))
	}
	return nil
}
