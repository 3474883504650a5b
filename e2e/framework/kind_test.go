package framework

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

func envFrom(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestKindSettings(t *testing.T) {
	s, err := kindSettingsFromEnv(envFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Members != 3 || s.Nodes != 2 || s.Image != "localhost/flotilla:e2e" || s.StopCluster != "apiserver" || !s.Build || s.Keep {
		t.Fatalf("defaults: %+v", s)
	}
	s, err = kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_MEMBERS": "4", "E2E_KIND_NODES": "3",
		"E2E_KIND_IMAGE": "example.com/x/flotilla:abc", "E2E_KIND_NODE_IMAGE": "kindest/node:v1.36.0",
		"E2E_KEEP": "1", "E2E_KIND_BUILD": "0", "E2E_KIND_STOP_CLUSTER": "nodes", "E2E_KIND_PREFIX": "ft"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Members != 4 || s.Nodes != 3 || s.NodeImage != "kindest/node:v1.36.0" || !s.Keep || s.Build || s.StopCluster != "nodes" || s.hubCluster() != "ft-hub" {
		t.Fatalf("knobs: %+v", s)
	}
	for k, v := range map[string]string{"E2E_KIND_MEMBERS": "0", "E2E_KIND_NODES": "x", "E2E_KIND_IMAGE": "flotilla",
		"E2E_KIND_STOP_CLUSTER": "pause", "E2E_KIND_PORT_BASE": "80"} {
		if _, err := kindSettingsFromEnv(envFrom(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: want an error naming it, got %v", k, v, err)
		}
	}
	if _, err := kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_IMAGE": "localhost:5000/flotilla:latest"})); err == nil {
		t.Error(":latest accepted")
	}
	if _, err := kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_IMAGE": "localhost:5000/flotilla:v1"})); err != nil {
		t.Errorf("registry with a port: %v", err)
	}
}

// The kind provider builds the image with hack/image, the recipe `make
// image` runs, into the archive it loads into the nodes.
func TestKindImageBuildArgs(t *testing.T) {
	got := strings.Join(imageBuildArgs("localhost/flotilla:e2e", "/s/image.tar"), " ")
	if want := "go run ./hack/image --image localhost/flotilla:e2e --tarball /s/image.tar"; got != want {
		t.Errorf("imageBuildArgs = %s, want %s", got, want)
	}
	if _, err := kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_IMAGE": "flotilla:e2e"})); err == nil ||
		!strings.Contains(err.Error(), "REGISTRY/REPOSITORY:TAG") {
		t.Errorf("E2E_KIND_IMAGE without a registry: %v, want an error asking for one", err)
	}
}

// buildImage really builds: a docker-archive tagged E2E_KIND_IMAGE, what
// nodeutils.LoadImageArchive (`ctr images import`) reads, with no container
// runtime on the machine.
func TestKindBuildImageWritesArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the hub and agent")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(goBinary(t))) // go, and no docker or podman
	s, _ := kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_IMAGE": "localhost/flotilla:kindtest"}))
	p := &kindProvider{root: root, s: s, stateDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := p.buildImage(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p.imageArchive())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manifest.json in %s: %v", p.imageArchive(), err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags, Layers []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "localhost/flotilla:kindtest" || len(m[0].Layers) != 1 {
			t.Fatalf("manifest.json %+v: want one image of one layer tagged localhost/flotilla:kindtest", m)
		}
		return
	}
}

func goBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "go")
}

func TestKindClusterConfigs(t *testing.T) {
	s, _ := kindSettingsFromEnv(envFrom(map[string]string{"E2E_KIND_MEMBERS": "5", "E2E_KIND_NODES": "3"}))
	hub := s.hubClusterConfig()
	if hub.Name != "flotilla-e2e-hub" || len(hub.Nodes) != 1 || hub.Nodes[0].Role != kindv1alpha4.ControlPlaneRole {
		t.Fatalf("hub: %+v", hub)
	}
	hostPorts := map[string]string{}
	use := func(cluster string, pm kindv1alpha4.PortMapping) {
		key := string(pm.Protocol) + "/" + strconv.Itoa(int(pm.HostPort))
		if prev, dup := hostPorts[key]; dup {
			t.Errorf("host port %s used by %s and %s", key, prev, cluster)
		}
		hostPorts[key] = cluster
		if pm.ListenAddress != "127.0.0.1" {
			t.Errorf("%s: %+v listens beyond loopback", cluster, pm)
		}
	}
	for _, pm := range hub.Nodes[0].ExtraPortMappings {
		use(hub.Name, pm)
	}
	for i := 1; i <= s.Members; i++ {
		c := s.memberClusterConfig(i)
		if c.Name != s.memberCluster(i) || len(c.Nodes) != 3 {
			t.Fatalf("member%d: %+v", i, c)
		}
		for a, n := range c.Nodes {
			wantRole := kindv1alpha4.WorkerRole
			if a == 0 {
				wantRole = kindv1alpha4.ControlPlaneRole
				if len(n.KubeadmConfigPatches) != 1 || !strings.Contains(n.KubeadmConfigPatches[0], "taints: []") {
					t.Errorf("member%d control plane keeps its taint: %v", i, n.KubeadmConfigPatches)
				}
			}
			if n.Role != wantRole || n.Labels["topology.kubernetes.io/region"] != s.region(i) {
				t.Errorf("member%d node %d: %+v", i, a, n)
			}
			for _, pm := range n.ExtraPortMappings {
				use(c.Name, pm)
			}
		}
		// What kind reads: the config as YAML.
		raw, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"apiVersion: kind.x-k8s.io/v1alpha4", "kind: Cluster", "role: control-plane", "role: worker",
			"containerPort: 30181", "protocol: UDP", "listenAddress: 127.0.0.1"} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("member%d config lacks %q:\n%s", i, want, raw)
			}
		}
	}
	if s.agentHealthPort(1, 2) != 28000+100+30 || s.memberDNSPort(2) != 28200 || s.hubDNSPort() != 28053 {
		t.Errorf("port layout moved: %d %d %d", s.agentHealthPort(1, 2), s.memberDNSPort(2), s.hubDNSPort())
	}
}

func TestKindNodeName(t *testing.T) {
	for a, want := range []string{"c-control-plane", "c-worker", "c-worker2", "c-worker3"} {
		if got := kindNodeName("c", a); got != want {
			t.Errorf("node %d: %s, want %s", a, got, want)
		}
	}
}

func TestKindRuntime(t *testing.T) {
	have := func(bins ...string) func(string) (string, error) {
		return func(b string) (string, error) {
			for _, x := range bins {
				if x == b {
					return "/usr/bin/" + b, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	cases := []struct {
		env     string
		bins    []string
		want    string
		wantErr string
	}{
		{"", []string{"docker", "podman"}, "docker", ""},
		{"", []string{"podman"}, "podman", ""},
		{"podman", []string{"docker", "podman"}, "podman", ""},
		{"podman", []string{"docker"}, "", "podman is not in PATH"},
		{"lxc", []string{"docker"}, "", "want docker, podman or nerdctl"},
		{"", nil, "", "neither docker nor podman"},
	}
	for _, c := range cases {
		got, err := kindRuntime(envFrom(map[string]string{"KIND_EXPERIMENTAL_PROVIDER": c.env}), have(c.bins...))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q %v: err %v, want %q", c.env, c.bins, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q %v: %q %v, want %q", c.env, c.bins, got, err, c.want)
		}
	}
}

// Without docker or podman, Up fails at once, before creating anything.
func TestKindUpFailsFastWithoutRuntime(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("KIND_EXPERIMENTAL_PROVIDER", "")
	t.Setenv("E2E_PROVIDER", "kind")
	root := t.TempDir()
	p, err := NewProvider(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Up(context.Background())
	if err == nil || !strings.Contains(err.Error(), "neither docker nor podman") {
		t.Fatalf("Up: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".local")); !os.IsNotExist(err) {
		t.Errorf("Up made state before failing: %v", err)
	}
	t.Setenv("E2E_KIND_MEMBERS", "many")
	if _, err := NewProvider(root); err == nil {
		t.Error("bad knob accepted")
	}
}

func TestFlags(t *testing.T) {
	args := []string{"--a=1", "--b", "2", "--c"}
	if v, ok := flagValue(args, "a"); !ok || v != "1" {
		t.Errorf("a: %q %v", v, ok)
	}
	if v, ok := flagValue(args, "b"); !ok || v != "2" {
		t.Errorf("b: %q %v", v, ok)
	}
	if _, ok := flagValue(args, "d"); ok {
		t.Error("d found")
	}
	got := setFlag(setFlag(args, "b", "3"), "a", "4")
	if strings.Join(got, " ") != "--c --b=3 --a=4" {
		t.Errorf("setFlag: %v", got)
	}
}

const hubManifests = `apiVersion: v1
kind: Namespace
metadata:
  name: flotilla-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: flotilla-hub
  namespace: flotilla-system
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: flotilla-hub}
  template:
    metadata:
      labels: {app.kubernetes.io/name: flotilla-hub}
    spec:
      containers:
      - name: hub
        image: ghcr.io/flotilla-io/flotilla:v0.1.0
        imagePullPolicy: Always
        args: ["--health-probe-bind-address=:9440", "--leader-elect-lease-duration", "15s"]
      - name: proxy
        image: envoyproxy/envoy:v1
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusters.cluster.flotilla.io
`

func TestRenderHub(t *testing.T) {
	out, w, err := renderForKind([]byte(hubManifests), "hub", "localhost/flotilla:e2e", 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != "Deployment" || w.Namespace != "flotilla-system" || w.Name != "flotilla-hub" ||
		w.Selector["app.kubernetes.io/name"] != "flotilla-hub" || w.HealthPort != 9440 || w.MetricsPort != 8080 || w.DNSPort != kindHubDNSPort {
		t.Fatalf("workload: %+v", w)
	}
	docs := strings.Split(string(out), "---\n")
	if len(docs) != 4 || !strings.Contains(docs[1], "kind: Namespace") || !strings.Contains(docs[3], "CustomResourceDefinition") {
		t.Fatalf("documents not kept:\n%s", out)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(docs[2]), &d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	hub, proxy := d.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[1]
	if hub.Image != "localhost/flotilla:e2e" || hub.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("hub image: %s %s", hub.Image, hub.ImagePullPolicy)
	}
	if proxy.Image != "envoyproxy/envoy:v1" {
		t.Errorf("a foreign container was rewritten: %s", proxy.Image)
	}
	args := strings.Join(hub.Args, " ")
	for _, want := range append([]string{"--health-probe-bind-address=:9440", "--metrics-bind-address=:8080", "--dns-traffic-address=:5353"}, kindFastHubFlags...) {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %s: %s", want, args)
		}
	}
	if strings.Count(args, "--leader-elect-lease-duration") != 1 || contains(hub.Args, "15s") {
		t.Errorf("the manifest's lease duration survived FAST: %s", args)
	}
	if _, _, err := renderForKind([]byte(hubManifests), "agent", "x:y", 2); err == nil || !strings.Contains(err.Error(), "Deployment") {
		t.Errorf("agent render of hub manifests: %v", err)
	}
}

const agentManifests = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: flotilla-agent
  namespace: flotilla-system
spec:
  replicas: 2
  selector:
    matchLabels: {app: flotilla-agent}
  template:
    metadata:
      labels: {app: flotilla-agent}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]
            - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: flotilla-agent}}
          - weight: 10
            podAffinityTerm:
              topologyKey: topology.kubernetes.io/zone
              labelSelector: {matchLabels: {app: flotilla-agent}}
      containers:
      - name: agent
        image: flotilla:dev
        command: [/agent]
        args: [--metrics-bind-address, "0", --cluster-name, member1]
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: flotilla-dns-probe
  namespace: flotilla-system
spec:
  selector:
    matchLabels: {app: flotilla-dns-probe}
  template:
    metadata:
      labels: {app: flotilla-dns-probe}
    spec:
      containers:
      - name: dns-probe
        image: flotilla:dev
        command: [/agent, dns-probe]
        args: [--metrics-bind-address=0]
`

func TestRenderAgent(t *testing.T) {
	out, w, err := renderForKind([]byte(agentManifests), "agent", "localhost/flotilla:e2e", 3)
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != "Deployment" || w.Name != "flotilla-agent" || w.HealthPort != 10357 || w.MetricsPort != 8080 || w.DNSPort != 0 {
		t.Fatalf("workload: %+v", w)
	}
	docs := strings.Split(string(out), "---\n")
	if len(docs) != 3 {
		t.Fatalf("documents not kept:\n%s", out)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(docs[1]), &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("agent replicas %v, want one per node (3)", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "localhost/flotilla:e2e" || strings.Contains(strings.Join(c.Args, " "), "--metrics-bind-address 0") ||
		!strings.Contains(strings.Join(c.Args, " "), "--cluster-name member1") {
		t.Errorf("container: %+v", c)
	}
	terms := d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms: %+v", terms)
	}
	for _, term := range terms {
		last := term.MatchExpressions[len(term.MatchExpressions)-1]
		if len(term.MatchExpressions) != 2 || last.Key != kindAgentStoppedLabel || last.Operator != corev1.NodeSelectorOpDoesNotExist {
			t.Errorf("term does not keep off stopped nodes: %+v", term)
		}
	}
	// The DNS probe runs the loaded image and is otherwise untouched: it
	// keeps running on a node whose agent is "stopped".
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal([]byte(docs[2]), &ds); err != nil {
		t.Fatal(err)
	}
	if pc := ds.Spec.Template.Spec.Containers[0]; pc.Image != "localhost/flotilla:e2e" || pc.ImagePullPolicy != corev1.PullIfNotPresent ||
		strings.Join(pc.Args, " ") != "--metrics-bind-address=0" || ds.Spec.Template.Spec.Affinity != nil {
		t.Errorf("DNS probe DaemonSet: %+v", ds.Spec.Template.Spec)
	}
	// One agent per node, whatever the manifest prefers: the hostname
	// preference becomes a requirement (other preferences stay), and a
	// rollout replaces pods in place.
	paa := d.Spec.Template.Spec.Affinity.PodAntiAffinity
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || paa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname ||
		paa.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["app"] != "flotilla-agent" {
		t.Errorf("required anti-affinity: %+v", paa.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	if len(paa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 || paa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelTopologyZone {
		t.Errorf("preferred anti-affinity: %+v", paa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("strategy: %+v", d.Spec.Strategy)
	}
	bare := corev1.PodSpec{}
	keepOffStopped(&bare)
	if len(bare.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 {
		t.Errorf("bare spec: %+v", bare.Affinity)
	}
	svc := kindServices(w, "agent")[0]
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Spec.Ports[0].NodePort != kindAgentHealthNodePort ||
		svc.Spec.Ports[0].TargetPort.IntValue() != 10357 || svc.Spec.Selector["app"] != "flotilla-agent" || svc.Namespace != "flotilla-system" {
		t.Errorf("agent Service: %+v", svc)
	}
}

func TestIsFlotillaContainer(t *testing.T) {
	for image, want := range map[string]bool{"flotilla:dev": true, "ghcr.io/flotilla-io/flotilla:v1": true,
		"localhost:5000/flotilla@sha256:00": true, "registry.k8s.io/coredns:v1": false, "flotilla.example.com/envoy:v1": false} {
		if got := isFlotillaContainer(corev1.Container{Image: image}); got != want {
			t.Errorf("%s: %v", image, got)
		}
	}
	if !isFlotillaContainer(corev1.Container{Image: "my/image:x", Command: []string{"/hub"}}) {
		t.Error("/hub command not recognised")
	}
}

func TestKindEnvironmentFile(t *testing.T) {
	s, _ := kindSettingsFromEnv(envFrom(nil))
	dir := t.TempDir()
	path := filepath.Join(dir, "environment")
	if err := os.WriteFile(path, s.environmentFile(dir, filepath.Join(dir, "kubeconfig")), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := LoadEnvironment(path)
	if err != nil {
		t.Fatal(err)
	}
	if env.HubContext != "flotilla-e2e-hub" || env.HubHealth != "127.0.0.1:28000" || env.HubMetrics != "127.0.0.1:28001" ||
		env.HubDNS != "127.0.0.1:28053" || env.CtlScript != "" || env.Prefix != "flotilla-e2e" ||
		env.HubAgentKubeconfig != filepath.Join(dir, "hub.kubeconfig") || len(env.Members) != 3 {
		t.Fatalf("env: %+v", env)
	}
	m := env.Members[1]
	if m.Name != "member2" || m.Context != "flotilla-e2e-member2" || m.DNS != "127.0.0.1:28200" ||
		strings.Join(m.Agents, " ") != "agent-member2-0 agent-member2-1" ||
		strings.Join(m.AgentNodes, " ") != "flotilla-e2e-member2-control-plane flotilla-e2e-member2-worker" ||
		strings.Join(m.AgentHealth, " ") != "127.0.0.1:28210 127.0.0.1:28220" ||
		strings.Join(m.AgentMetrics, " ") != "127.0.0.1:28211 127.0.0.1:28221" ||
		m.Kubeconfig != filepath.Join(dir, "member2", "kubeconfig") {
		t.Fatalf("member2: %+v", m)
	}
	if env.ClusterName(m) != "flotilla-e2e-member2" || env.ClusterName(m) != s.memberCluster(2) {
		t.Errorf("ClusterName %s is not the kind cluster", env.ClusterName(m))
	}
}

// Every name the specs pass Environment.Ctl maps to a kind target.
func TestKindCtlTarget(t *testing.T) {
	s, _ := kindSettingsFromEnv(envFrom(nil))
	dir := t.TempDir()
	path := filepath.Join(dir, "environment")
	if err := os.WriteFile(path, s.environmentFile(dir, "kc"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := LoadEnvironment(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		action, name string
		want         kindTarget
	}{
		{"restart", "hub", kindTarget{Kind: "hub"}},
		{"kill", "agent-member2-1", kindTarget{Kind: "agent", Member: 2, Node: "flotilla-e2e-member2-worker"}},
		{"stop", "agent-member3-0", kindTarget{Kind: "agent", Member: 3, Node: "flotilla-e2e-member3-control-plane"}},
		{"start", "agent-member1-0", kindTarget{Kind: "agent", Member: 1, Node: "flotilla-e2e-member1-control-plane"}},
		{"stop", "coredns-member1", kindTarget{Kind: "coredns", Member: 1}},
		{"start", "coredns-member1", kindTarget{Kind: "coredns", Member: 1}},
		{"stop-cluster", env.ClusterName(env.Members[2]), kindTarget{Kind: "cluster", Cluster: "flotilla-e2e-member3", Member: 3}},
		{"start-cluster", env.Prefix + "-hub", kindTarget{Kind: "cluster", Cluster: "flotilla-e2e-hub"}},
	}
	for _, c := range cases {
		got, err := kindCtlTarget(env, c.action, c.name)
		if err != nil || got != c.want {
			t.Errorf("%s %s: %+v %v, want %+v", c.action, c.name, got, err, c.want)
		}
	}
	for _, bad := range [][2]string{{"stop", "agent-member4-0"}, {"pause", "hub"}, {"stop-cluster", "other"}, {"stop", "coredns-member9"}} {
		if _, err := kindCtlTarget(env, bad[0], bad[1]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestEnvironmentCtlDispatch(t *testing.T) {
	var got []string
	env := &Environment{CtlScript: "/nonexistent", ctl: func(_ context.Context, action, name string) error {
		got = append(got, action+" "+name)
		return nil
	}}
	if err := env.Ctl(context.Background(), "stop", "hub"); err != nil || strings.Join(got, ",") != "stop hub" {
		t.Fatalf("%v %v", got, err)
	}
	if err := (&Environment{}).Ctl(context.Background(), "stop", "hub"); err == nil {
		t.Error("an environment without script or controller did something")
	}
}

const kindKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: kind-%[1]s
  cluster: {server: "https://127.0.0.1:%[2]s", certificate-authority-data: Q0E=}
users:
- name: kind-%[1]s
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
contexts:
- name: kind-%[1]s
  context: {cluster: kind-%[1]s, user: kind-%[1]s}
current-context: kind-%[1]s
`

func TestMergeKubeconfigs(t *testing.T) {
	raw := map[string][]byte{}
	for name, port := range map[string]string{"p-hub": "1001", "p-member1": "1002"} {
		raw[name] = []byte(strings.NewReplacer("%[1]s", name, "%[2]s", port).Replace(kindKubeconfig))
	}
	merged, err := mergeKubeconfigs(raw, "p-hub")
	if err != nil {
		t.Fatal(err)
	}
	if merged.CurrentContext != "p-hub" || len(merged.Contexts) != 2 || merged.Clusters["p-member1"].Server != "https://127.0.0.1:1002" {
		t.Fatalf("merged: %+v", merged)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	env := &Environment{Kubeconfig: path}
	cfg, err := env.RestConfig("p-member1")
	if err != nil || cfg.Host != "https://127.0.0.1:1002" || string(cfg.CAData) != "CA" {
		t.Fatalf("RestConfig: %+v %v", cfg, err)
	}
	one := minify(merged, "p-member1")
	if len(one.Contexts) != 1 || one.CurrentContext != "p-member1" || len(merged.Contexts) != 2 {
		t.Errorf("minify: %+v", one)
	}
	if _, err := mergeKubeconfigs(map[string][]byte{"x": []byte("apiVersion: v1\nkind: Config\n")}, "x"); err == nil {
		t.Error("a kubeconfig without context merged")
	}
}

func TestClusterObjects(t *testing.T) {
	s, _ := kindSettingsFromEnv(envFrom(nil))
	docs := strings.Split(strings.TrimPrefix(string(s.clusterObjects()), "---\n"), "---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents", len(docs))
	}
	var c struct {
		Metadata struct{ Name string }
		Spec     struct {
			SyncMode, Provider, Region string
			Zones                      []string
		}
	}
	if err := yaml.Unmarshal([]byte(docs[2]), &c); err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Name != "member3" || c.Spec.SyncMode != "Pull" || c.Spec.Provider != "kind" || c.Spec.Region != "region-b" ||
		strings.Join(c.Spec.Zones, ",") != "region-b-1,region-b-2" {
		t.Errorf("member3: %+v", c)
	}
	if hubServer("172.18.0.2") != "https://172.18.0.2:6443" || hubServer("fc00::2") != "https://[fc00::2]:6443" {
		t.Error(hubServer("172.18.0.2"))
	}
}
