#!/usr/bin/env bash
# Brings up real Kubernetes clusters on this machine for the real-node e2e
# suite (e2e/realnode) and for trying Flotilla as users install it: a hub and
# REALNODE_MEMBERS members, each one node with its own etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (+ runc), kubelet,
# kube-proxy and CoreDNS as a pod, each cluster in its own network namespace.
#
#   hack/realnode-up.sh            # needs root, containerd, runc, CNI plugins, iptables
#   hack/realnode-down.sh          # removes everything this made
#
# It installs no Flotilla: hack/realnode-install.sh does that, only through
# the documented path (docs/install.md). The clusters:
#
#   cluster   netns / node IP     kubeconfig context
#   hub       $SUBNET.10          $PREFIX-hub
#   member<i> $SUBNET.(10+i)      $PREFIX-member<i>
#
# Every cluster listens on its node IP (apiserver :6443) in its own netns and
# uses the usual ports there; the host reaches them over the bridge
# $PREFIX-br ($SUBNET.1/24), and pod IPs ($PODNET.<k>.0/24) through a route
# via the cluster's node IP. Nothing listens in the host's network
# namespace and no host iptables rule is added. State: $STATE_DIR (default
# .local/realnode); sockets: /run/$PREFIX. Settings known to work here are
# in ../shared/realnode.md (containerd 1.6 without CAP_SYS_RESOURCE needs
# restrict_oom_score_adj; kubelet 1.36 on cgroup v1 needs failCgroupV1=false).
#
# Environment: REALNODE_MEMBERS (2), REALNODE_PREFIX (flrn), REALNODE_SUBNET
# (10.213.0: the first three octets of the bridge's /24), REALNODE_STATE_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/realnode-lib.sh
source "$ROOT/hack/realnode-lib.sh"

realnode_preflight || exit 2

log() { printf '>> realnode: %s\n' "$*" >&2; }

# Clusters of another checkout (or a run that was killed) hold the same
# network namespaces, bridge and sockets: remove them first.
if { [ -d "$RUN_DIR" ] || ip link show "$BRIDGE" >/dev/null 2>&1; } && [ ! -f "$STATE_DIR/kubeconfig" ]; then
	log "removing leftovers of an earlier run (/run/$PREFIX, $BRIDGE)"
	"$ROOT/hack/realnode-down.sh" || true
fi
mkdir -p "$STATE_DIR" "$RUN_DIR"
"$ROOT/hack/build-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy coredns

# Host sysctls the kubelet sets for itself (vm.overcommit_memory,
# kernel.panic, ...): remembered once, restored by realnode-down.sh.
if [ ! -f "$STATE_DIR/host-sysctls" ]; then
	for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
		printf '%s=%s\n' "$k" "$(sysctl -n "$k")"
	done >"$STATE_DIR/host-sysctls"
fi

# Images no registry serves here: the sandbox ("pause", also the specs'
# workload) and CoreDNS, built from the project's own binaries.
IMAGES=$STATE_DIR/images
mkdir -p "$IMAGES"
if [ ! -s "$IMAGES/pause.tar" ] || [ "$ROOT/hack/realnode/pause/main.go" -nt "$IMAGES/pause.tar" ]; then
	log "building the pause image"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES/pause" ./hack/realnode/pause)
	(cd "$ROOT" && go run ./hack/realnode/imagepack --image "$PAUSE_IMAGE" --out "$IMAGES/pause.tar" "$IMAGES/pause=/pause" -- /pause)
fi
if [ ! -s "$IMAGES/coredns.tar" ] || [ "$BIN/coredns" -nt "$IMAGES/coredns.tar" ]; then
	log "building the CoreDNS image"
	(cd "$ROOT" && go run ./hack/realnode/imagepack --image "$COREDNS_IMAGE" --out "$IMAGES/coredns.tar" "$BIN/coredns=/coredns" -- /coredns)
fi

# --- the host bridge -------------------------------------------------------
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
	ip link add "$BRIDGE" type bridge
	ip addr add "$SUBNET.1/24" dev "$BRIDGE"
fi
ip link set "$BRIDGE" up

# --- PKI (one CA per cluster) ----------------------------------------------
# cert DIR NAME CN ORG [SAN]: a key and a certificate signed by DIR/ca.
cert() {
	local dir=$1 name=$2 cn=$3 org=$4 san=${5:-}
	[ -s "$dir/$name.crt" ] && return 0
	openssl genrsa -out "$dir/$name.key" 2048 2>/dev/null
	openssl req -new -key "$dir/$name.key" -subj "/CN=$cn${org:+/O=$org}" -out "$dir/$name.csr" 2>/dev/null
	local ext=$dir/$name.ext
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$san" ]; then
			echo "extendedKeyUsage=serverAuth,clientAuth"
			echo "subjectAltName=$san"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
		-days 30 -sha256 -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
	rm -f "$dir/$name.csr" "$ext"
}

# kubeconfig FILE SERVER CERTNAME: a kubeconfig of DIR's admin-like identity.
kubeconfig_file() {
	local file=$1 server=$2 pki=$3 user=$4
	cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: u
  user:
    client-certificate: $pki/$user.crt
    client-key: $pki/$user.key
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
EOF
}

# start NAME CLUSTER CMD...: runs CMD in the cluster's network namespace
# (keeping the host's mount namespace, so the kubelet's volume mounts are
# what containerd sees), logging to logs/NAME.log, pid in pids/NAME.pid.
start() {
	local name=$1 c=$2
	shift 2
	local d=$STATE_DIR/$c
	local pidfile=$d/pids/$name.pid
	if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		return 0
	fi
	mkdir -p "$d/pids" "$d/logs"
	# setsid: its own session, so stopping the suite's process group leaves
	# the clusters to realnode-down.sh; nice: the clusters yield to the tests.
	setsid nice -n 5 nsenter --net="/run/netns/$(netns "$c")" "$@" >>"$d/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

# wait_for DESC SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local desc=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			log "timed out after ${secs}s waiting for $desc"
			return 1
		fi
		sleep 1
	done
}

up_cluster() {
	local c=$1 k=$2
	local d=$STATE_DIR/$c ip=$SUBNET.$((10 + k)) ns run=$RUN_DIR/$c
	ns=$(netns "$c")
	local pki=$d/pki podcidr=$PODNET.$k.0/24 node=$c
	mkdir -p "$d" "$pki" "$run" "$d/cni/net.d" "$d/etcd"

	# Network namespace, a veth into the host bridge.
	if [ ! -e "/run/netns/$ns" ]; then
		ip netns add "$ns"
	fi
	local vh=${PREFIX}-${k}h vn=${PREFIX}-${k}n
	if ! ip link show "$vh" >/dev/null 2>&1; then
		ip link add "$vh" type veth peer name "$vn"
		ip link set "$vn" netns "$ns"
		ip link set "$vh" master "$BRIDGE"
		ip -n "$ns" addr add "$ip/24" dev "$vn"
	fi
	ip link set "$vh" up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set "$vn" up
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
	# The host reaches pod IPs through the cluster's node (tests read pods'
	# /metrics); the route goes with the bridge.
	ip route replace "$podcidr" via "$ip" dev "$BRIDGE"

	# PKI.
	if [ ! -s "$pki/ca.crt" ]; then
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 30 \
			-subj "/CN=$PREFIX-$c-ca" 2>/dev/null
		openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
		openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	fi
	cert "$pki" apiserver kube-apiserver "" "IP:$ip,IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert "$pki" admin "$PREFIX-admin" system:masters
	cert "$pki" kubelet-client kube-apiserver-kubelet-client system:masters
	cert "$pki" controller-manager system:kube-controller-manager ""
	cert "$pki" scheduler system:kube-scheduler ""
	cert "$pki" node "system:node:$node" system:nodes
	cert "$pki" proxy system:kube-proxy ""
	local server=https://$ip:6443
	kubeconfig_file "$d/admin.kubeconfig" "$server" "$pki" admin
	kubeconfig_file "$d/controller-manager.kubeconfig" "$server" "$pki" controller-manager
	kubeconfig_file "$d/scheduler.kubeconfig" "$server" "$pki" scheduler
	kubeconfig_file "$d/kubelet.kubeconfig" "$server" "$pki" node
	kubeconfig_file "$d/proxy.kubeconfig" "$server" "$pki" proxy

	# Control plane.
	start etcd "$c" "$BIN/etcd" --name "$c" --data-dir "$d/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster "$c=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381 \
		--quota-backend-bytes 2147483648 --unsafe-no-fsync
	start kube-apiserver "$c" "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
		--bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$ip" \
		--service-cluster-ip-range "$SERVICE_CIDR" --service-node-port-range 30000-32767 \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--client-ca-file "$pki/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--authorization-mode Node,RBAC --allow-privileged=true \
		--enable-admission-plugins NodeRestriction \
		--kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--profiling=false --v=1
	wait_for "$c kube-apiserver" 120 "$BIN/kubectl" --kubeconfig "$d/admin.kubeconfig" get --raw /readyz
	start kube-controller-manager "$c" "$BIN/kube-controller-manager" \
		--kubeconfig "$d/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$d/controller-manager.kubeconfig" --authorization-kubeconfig "$d/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --controllers '*' --profiling=false --v=1
	start kube-scheduler "$c" "$BIN/kube-scheduler" --kubeconfig "$d/scheduler.kubeconfig" \
		--authentication-kubeconfig "$d/scheduler.kubeconfig" --authorization-kubeconfig "$d/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1

	# containerd, its own root, state and socket.
	cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$run/containerd"
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni/net.d"
EOF
	cat >"$d/cni/net.d/10-$PREFIX.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$PREFIX-$c",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$podcidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$d/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	start containerd "$c" containerd --config "$d/containerd.toml"
	wait_for "$c containerd" 60 ctr --address "$run/containerd.sock" version
	for image in pause coredns; do
		ctr --address "$run/containerd.sock" -n k8s.io images import --no-unpack "$IMAGES/$image.tar" >/dev/null
	done

	# kubelet: cgroupfs with its own cgroup root (two kubelets sharing
	# /kubepods delete each other's pod cgroups).
	cat >"$d/resolv.conf" <<EOF
nameserver 127.0.0.1
EOF
	cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
cgroupRoot: /$PREFIX-$c
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$run/containerd.sock
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $d/resolv.conf
podLogsDir: $d/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
# The host's disk and memory are shared with everything else: no eviction
# or image GC (it would delete the imported images nothing can pull again).
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 60
EOF
	# Its cgroup root in every hierarchy (cgroup v1), cpuset filled in.
	local sub
	for sub in /sys/fs/cgroup/*/; do
		mkdir -p "$sub$PREFIX-$c"
	done
	if [ -d /sys/fs/cgroup/cpuset/$PREFIX-$c ]; then
		cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$PREFIX-$c/cpuset.cpus"
		cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$PREFIX-$c/cpuset.mems"
	fi
	start kubelet "$c" "$BIN/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
		--hostname-override "$node" --node-ip "$ip" --root-dir "$d/kubelet" --cert-dir "$d/kubelet/pki" \
		--node-labels "$(node_labels "$c" "$k")" --v=1
	cat >"$d/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $d/proxy.kubeconfig}
hostnameOverride: $node
mode: iptables
clusterCIDR: $podcidr
bindAddress: $ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Global conntrack sysctls stay as the host has them.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
# Pods on one bridge reach each other's Services without br_netfilter.
iptables: {masqueradeAll: true}
EOF
	start kube-proxy "$c" "$BIN/kube-proxy" --config "$d/kube-proxy.yaml" --v=1
}

# The clusters come up side by side.
pids=()
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	log "starting $c"
	up_cluster "$c" "$k" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

# One kubeconfig for the host, a context per cluster.
KUBECONFIG_FILE=$STATE_DIR/kubeconfig
args=()
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE.tmp" set-cluster "$PREFIX-$c" \
		--server "https://$SUBNET.$((10 + k)):6443" --certificate-authority "$STATE_DIR/$c/pki/ca.crt" --embed-certs >/dev/null
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE.tmp" set-credentials "$PREFIX-$c-admin" \
		--client-certificate "$STATE_DIR/$c/pki/admin.crt" --client-key "$STATE_DIR/$c/pki/admin.key" --embed-certs >/dev/null
	"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE.tmp" set-context "$PREFIX-$c" \
		--cluster "$PREFIX-$c" --user "$PREFIX-$c-admin" >/dev/null
done
"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE.tmp" use-context "$PREFIX-hub" >/dev/null
chmod 600 "$KUBECONFIG_FILE.tmp"
mv "$KUBECONFIG_FILE.tmp" "$KUBECONFIG_FILE"

# CoreDNS in every cluster, and every node Ready.
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	kc=("$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --context "$PREFIX-$c")
	wait_for "node $c" 180 "${kc[@]}" get node "$c"
	sed -e "s#@IMAGE@#$COREDNS_IMAGE#" -e "s#@DNS_IP@#$DNS_IP#" "$ROOT/hack/realnode/coredns.yaml" |
		"${kc[@]}" apply --server-side --force-conflicts -f - >/dev/null
done
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	kc=("$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --context "$PREFIX-$c")
	"${kc[@]}" wait --for condition=Ready "node/$c" --timeout 180s >/dev/null
	"${kc[@]}" -n kube-system rollout status deployment/coredns --timeout 180s >/dev/null
	log "$c ready: node $c ($SUBNET.$((10 + k))), CoreDNS at $DNS_IP"
done
log "kubeconfig: $KUBECONFIG_FILE (contexts $PREFIX-hub, $PREFIX-member1..$MEMBERS)"
