#!/usr/bin/env bash
# Bring up a real single-node Kubernetes cluster on this Linux machine, without Docker or a registry,
# and install the gateway-sizer test bed on it (Contour + Envoy, the nginx backend, Prometheus).
#
#   sudo k8s/cluster/up.sh          # stdout: export KUBECONFIG=... (eval-able); progress on stderr
#
# Builds or reuses everything in ${GATEWAY_SIZER_CACHE:-$HOME/.cache/gateway-sizer}. Every host change
# (PIDs, interfaces, iptables chains, mounts, cgroup folders, sysctls, paths) is recorded under
# $CACHE/cluster/state so that k8s/cluster/down.sh removes exactly that. On failure it tears down what it
# started and keeps the logs in $CACHE/logs/cluster.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"
REPO=$(cd "$K8S_DIR/.." && pwd)

require_root up.sh
take_lock
t0=$(date +%s)
phase() { log "[$(( $(date +%s) - t0 ))s] $*"; }

# ---------------------------------------------------------------- already up?
if [ -d "$STATE_DIR" ]; then
    healthy=1
    for d in "${DAEMONS[@]}"; do recorded_pid "$d" >/dev/null || healthy=0; done
    if [ "$healthy" = 1 ] && kubectl_ --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
        phase "cluster already up"
        echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
        exit 0
    fi
    phase "a previous cluster is partly up: tearing it down first"
    flock -u 9
    "$HERE/down.sh" >&2
    take_lock
fi

# ---------------------------------------------------------------- inputs (cached)
phase "Debian packages"
"$HERE/deps.sh"
phase "binaries (k8s/cluster/build.sh)"
"$HERE/build.sh" kubernetes contour coredns prometheus helm >/dev/null
HELM=$(component_path helm)
phase "images (k8s/images/build_images.py)"
"$PYTHON" "$K8S_DIR/images/build_images.py"
IMAGE_REFS=$("$PYTHON" "$K8S_DIR/images/build_images.py" --refs)  # IMAGE_PAUSE=localhost/pause:1 ...
eval "$IMAGE_REFS"

# ---------------------------------------------------------------- record the host as it is
rm -rf --one-file-system "$CLUSTER_DIR" "$LOG_DIR"
mkdir -p "$STATE_DIR/pids" "$PKI_DIR" "$LOG_DIR" "$RUN_DIR"

cleanup_on_failure() {
    local rc=$?
    trap - EXIT INT TERM
    [ "$rc" = 0 ] && return
    log "cluster-up failed (exit $rc); tearing down what it started. Logs: $LOG_DIR"
    flock -u 9 || true
    "$HERE/down.sh" >&2 || true
    exit "$rc"
}
trap cleanup_on_failure EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

snapshot_host() {
    sysctl -a 2>/dev/null >"$STATE_DIR/sysctl.before" || true
    ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 >"$STATE_DIR/links.before"
    ip netns list 2>/dev/null | awk '{print $1}' >"$STATE_DIR/netns.before" || true
    local ipt t
    for ipt in iptables ip6tables; do
        for t in filter nat mangle raw; do
            { "$ipt-save" -t "$t" 2>/dev/null || true; } | awk -v t="$t" '/^:/ {print t, substr($1, 2)}'
        done >"$STATE_DIR/$ipt.chains.before"
    done
    local h n
    : >"$STATE_DIR/cgroups.before"
    for h in /sys/fs/cgroup/*/; do
        for n in "${CGROUP_NAMES[@]}"; do [ -d "$h$n" ] && echo "$h$n" >>"$STATE_DIR/cgroups.before"; done
    done
    : >"$STATE_DIR/paths.created"
    for p in "${HOST_PATHS[@]}"; do [ -e "$p" ] || echo "$p" >>"$STATE_DIR/paths.created"; done
}
phase "recording the host's state"
snapshot_host

# Start a daemon in its own session; record "PID STARTTIME" for down.sh.
start_daemon() {
    local name=$1; shift
    # fd 9 holds the cluster lock: a daemon must not inherit it, or the lock outlives this script
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$STATE_DIR/pids/$name.tmp" "$@" \
        </dev/null >"$LOG_DIR/$name.log" 2>&1 9>&- &
    local i pid=""
    for ((i = 0; i < 50; i++)); do
        [ -s "$STATE_DIR/pids/$name.tmp" ] && pid=$(cat "$STATE_DIR/pids/$name.tmp") && break
        sleep 0.1
    done
    [ -n "$pid" ] || die "$name did not start (see $LOG_DIR/$name.log)"
    echo "$pid $(start_time "$pid")" >"$STATE_DIR/pids/$name"
    rm -f "$STATE_DIR/pids/$name.tmp"
}

# wait_for DESCRIPTION SECONDS DAEMON COMMAND...: poll until COMMAND succeeds; fail early if DAEMON died.
wait_for() {
    local what=$1 secs=$2 daemon=$3 i; shift 3
    for ((i = 0; i < secs * 2; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        if [ "$daemon" != - ] && ! recorded_pid "$daemon" >/dev/null; then
            tail -n 5 "$LOG_DIR/$daemon.log" >&2 || true
            die "$daemon exited while waiting for $what (see $LOG_DIR/$daemon.log)"
        fi
        sleep 0.5
    done
    die "timed out after ${secs}s waiting for $what"
}

# ---------------------------------------------------------------- network
phase "network: node IP $NODE_IP on veth $NODE_VETH, ip_forward"
ip link add "$NODE_VETH" type veth peer name "$NODE_VETH_PEER"
echo "$NODE_VETH" >>"$STATE_DIR/links.created"
ip addr add "$NODE_IP/24" dev "$NODE_VETH"
ip link set "$NODE_VETH" up
ip link set "$NODE_VETH_PEER" up
# Service IPs route into the veth (nothing answers there): unless kube-proxy rewrote a packet to a pod,
# it never leaves the machine.
ip route add "$SERVICE_CIDR" dev "$NODE_VETH" src "$NODE_IP"
echo "$CNI_BRIDGE" >>"$STATE_DIR/links.created"
sysctl -q -w net.ipv4.ip_forward=1
sysctl -q -w net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true

# ---------------------------------------------------------------- PKI
phase "certificates"
CA=$PKI_DIR/ca
gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
# cert NAME SUBJECT EXTENSIONS: a key and a certificate signed by $SIGNER (default: the cluster's CA)
cert() {
    local signer=${SIGNER:-$CA}
    gen_key "$PKI_DIR/$1"
    openssl req -new -key "$PKI_DIR/$1.key" -subj "$2" -out "$PKI_DIR/$1.csr" 2>/dev/null
    openssl x509 -req -in "$PKI_DIR/$1.csr" -CA "$signer.crt" -CAkey "$signer.key" -CAcreateserial -days 365 \
        -extfile <(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$3") \
        -out "$PKI_DIR/$1.crt" 2>/dev/null || die "openssl could not sign $1"
    rm -f "$PKI_DIR/$1.csr"
}
# ca NAME SUBJECT: a self-signed CA
ca() {
    gen_key "$1"
    openssl req -x509 -new -key "$1.key" -subj "$2" -days 365 -out "$1.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}
chmod 700 "$PKI_DIR"  # private keys: root only (the admin key is cluster-admin)
ca "$CA" "/CN=gateway-sizer-cluster-ca"
# etcd trusts only certificates of its own CA: one the controller-manager signs CSRs with would do
ETCD_CA=$PKI_DIR/etcd-ca
ca "$ETCD_CA" "/CN=gateway-sizer-etcd-ca"
client="extendedKeyUsage=clientAuth"
cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:$KUBERNETES_SERVICE_IP,IP:$NODE_IP,IP:127.0.0.1"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
cert admin "/O=system:masters/CN=gateway-sizer-admin" "$client"
cert controller-manager "/CN=system:kube-controller-manager" "$client"
cert scheduler "/CN=system:kube-scheduler" "$client"
cert kube-proxy "/CN=system:kube-proxy" "$client"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client"
cert kubelet-serving "/CN=$NODE_NAME" "extendedKeyUsage=serverAuth
subjectAltName=DNS:$NODE_NAME,IP:$NODE_IP"
SIGNER=$ETCD_CA cert etcd-server "/CN=gsz-etcd" "extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
SIGNER=$ETCD_CA cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" "$client"
gen_key "$PKI_DIR/sa"
openssl pkey -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null

# kubeconfig FILE CERT_NAME
kubeconfig() {
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gateway-sizer
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$CA.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI_DIR/$2.crt")
    client-key-data: $(base64 -w0 "$PKI_DIR/$2.key")
contexts:
- name: gateway-sizer
  context:
    cluster: gateway-sizer
    user: $2
current-context: gateway-sizer
EOF
    chmod 600 "$1"
}
for n in controller-manager scheduler kube-proxy kubelet; do kubeconfig "$CLUSTER_DIR/$n.kubeconfig" "$n"; done
kubeconfig "$ADMIN_KUBECONFIG" admin

# ---------------------------------------------------------------- etcd + control plane
# TLS on both ports, and only clients with a certificate of the etcd CA (the API server): whoever can write
# to etcd owns the cluster, and through a privileged pod the host.
phase "etcd (https://127.0.0.1:$ETCD_CLIENT_PORT, client certificates required)"
ETCD_URL=https://127.0.0.1:$ETCD_CLIENT_PORT
ETCD_PEER_URL=https://127.0.0.1:$ETCD_PEER_PORT
start_daemon etcd etcd --name gsz --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "$ETCD_PEER_URL" --initial-advertise-peer-urls "$ETCD_PEER_URL" \
    --initial-cluster "gsz=$ETCD_PEER_URL" --initial-cluster-state new \
    --cert-file "$PKI_DIR/etcd-server.crt" --key-file "$PKI_DIR/etcd-server.key" \
    --client-cert-auth --trusted-ca-file "$ETCD_CA.crt" \
    --peer-cert-file "$PKI_DIR/etcd-server.crt" --peer-key-file "$PKI_DIR/etcd-server.key" \
    --peer-client-cert-auth --peer-trusted-ca-file "$ETCD_CA.crt"
wait_for "etcd health" 30 etcd curl -sf -m 2 --cacert "$ETCD_CA.crt" \
    --cert "$PKI_DIR/apiserver-etcd-client.crt" --key "$PKI_DIR/apiserver-etcd-client.key" "$ETCD_URL/health"

phase "kube-apiserver (https://$NODE_IP:$APISERVER_PORT)"
start_daemon kube-apiserver "$(component_path kube-apiserver)" \
    --etcd-servers="$ETCD_URL" --etcd-cafile="$ETCD_CA.crt" \
    --etcd-certfile="$PKI_DIR/apiserver-etcd-client.crt" --etcd-keyfile="$PKI_DIR/apiserver-etcd-client.key" \
    --bind-address="$NODE_IP" --secure-port="$APISERVER_PORT" --advertise-address="$NODE_IP" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --client-ca-file="$CA.crt" --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$CA.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI_DIR/sa.pub" --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --profiling=false --cert-dir="$CLUSTER_DIR/apiserver"
wait_for "kube-apiserver /readyz" 90 kube-apiserver kubectl_ --request-timeout=5s get --raw /readyz

phase "kube-controller-manager, kube-scheduler"
cm=$CLUSTER_DIR/controller-manager.kubeconfig
start_daemon kube-controller-manager "$(component_path kube-controller-manager)" \
    --kubeconfig="$cm" --authentication-kubeconfig="$cm" --authorization-kubeconfig="$cm" \
    --bind-address=127.0.0.1 --cert-dir="$CLUSTER_DIR/controller-manager" \
    --root-ca-file="$CA.crt" --service-account-private-key-file="$PKI_DIR/sa.key" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$CA.crt" --cluster-signing-key-file="$CA.key" \
    --leader-elect=false --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
sc=$CLUSTER_DIR/scheduler.kubeconfig
start_daemon kube-scheduler "$(component_path kube-scheduler)" \
    --kubeconfig="$sc" --authentication-kubeconfig="$sc" --authorization-kubeconfig="$sc" \
    --bind-address=127.0.0.1 --cert-dir="$CLUSTER_DIR/scheduler" --leader-elect=false --profiling=false

# ---------------------------------------------------------------- containerd + images
phase "containerd ($CONTAINERD_SOCK)"
mkdir -p "$CLUSTER_DIR/cni/net.d" "$CLUSTER_DIR/cni/ipam" "$CONTAINERD_ROOT/root" "$RUN_DIR/containerd"
cat >"$CLUSTER_DIR/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT/root"
state = "$RUN_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_ROOT/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$IMAGE_PAUSE"
  # root here lacks CAP_SYS_RESOURCE: runc cannot lower a sandbox's oom_score_adj
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
EOF
cat >"$CLUSTER_DIR/cni/net.d/10-gateway-sizer.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "gateway-sizer",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "${NODE_POD_CIDR%.0/24}.1"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start_daemon containerd containerd --config "$CLUSTER_DIR/containerd.toml"
wait_for "containerd socket" 30 containerd ctr --address "$CONTAINERD_SOCK" version
"$PYTHON" "$K8S_DIR/images/build_images.py" --import --address "$CONTAINERD_SOCK"

# ---------------------------------------------------------------- kubelet + kube-proxy
phase "kubelet ($NODE_NAME, $NODE_IP)"
mkdir -p "$CLUSTER_DIR/kubelet" "$CLUSTER_DIR/pod-logs"
cat >"$CLUSTER_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $CA.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI_DIR/kubelet-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-serving.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
podLogsDir: $CLUSTER_DIR/pod-logs
protectKernelDefaults: false
shutdownGracePeriod: 0s
evictionHard: {memory.available: 100Mi, nodefs.available: 5%, imagefs.available: 5%}
imageGCHighThresholdPercent: 98
imageGCLowThresholdPercent: 95
EOF
# --containerd: cAdvisor's own containerd client (container/pod/namespace labels of /metrics/cadvisor)
# does not follow containerRuntimeEndpoint.
# --housekeeping-interval=1s: cAdvisor refreshes a busy container's CPU counter every second instead of
# every 10-15 s, so a sweep's windows stay as short here as on the local platform (on other clusters the
# sweep lengthens a window until it holds three samples).
start_daemon kubelet "$(component_path kubelet)" --config="$CLUSTER_DIR/kubelet.yaml" \
    --kubeconfig="$CLUSTER_DIR/kubelet.kubeconfig" --root-dir="$CLUSTER_DIR/kubelet" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --containerd="$CONTAINERD_SOCK" \
    --housekeeping-interval=1s
node_ready() { [ "$(kubectl_ --request-timeout=5s get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for "node $NODE_NAME Ready" 120 kubelet node_ready

phase "kube-proxy (iptables mode)"
cat >"$CLUSTER_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {minSyncPeriod: 1s}
EOF
start_daemon kube-proxy "$(component_path kube-proxy)" --config="$CLUSTER_DIR/kube-proxy.yaml"
kube_proxy_synced() { iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q "default/kubernetes:https"; }
wait_for "kube-proxy rules for the kubernetes Service" 60 kube-proxy kube_proxy_synced

# ---------------------------------------------------------------- cluster add-ons and the test bed
phase "CoreDNS ($DNS_SERVICE_IP)"
sed -e "s|@IMAGE_COREDNS@|$IMAGE_COREDNS|" -e "s|@DNS_SERVICE_IP@|$DNS_SERVICE_IP|" \
    "$HERE/manifests/coredns.yaml" | kubectl_ apply -f - >&2

phase "Contour $CONTOUR_VERSION + Envoy DaemonSet (projectcontour)"
render_contour "$CLUSTER_DIR/kustomize/contour" >"$CLUSTER_DIR/contour.rendered.yaml"
kubectl_ apply --server-side -f "$CLUSTER_DIR/contour.rendered.yaml" >&2
kubectl_ wait --for=condition=Established --timeout=60s crd/httpproxies.projectcontour.io >&2

phase "Gateway API: CRDs, Contour's gateway provisioner, Gateway projectcontour/gateway-sizer"
kubectl_ apply --server-side -f "$(gateway_api_crds)" >&2
kubectl_ wait --for=condition=Established --timeout=60s crd/gateways.gateway.networking.k8s.io \
    crd/gatewayclasses.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io >&2
render_gateway_provisioner "$CLUSTER_DIR/kustomize/gateway-provisioner" >"$CLUSTER_DIR/gateway-provisioner.rendered.yaml"
kubectl_ apply --server-side -f "$CLUSTER_DIR/gateway-provisioner.rendered.yaml" >&2

phase "Prometheus (monitoring, $PROMETHEUS_SERVICE_IP:9090)"
kubectl_ apply -k "$HERE/overlays/prometheus" >&2

phase "test bed chart (gateway-loadtest) and runner RBAC"
"$HELM" upgrade --install gateway-loadtest "$REPO/charts/gateway-loadtest" --kubeconfig "$ADMIN_KUBECONFIG" \
    --namespace gateway-loadtest --create-namespace -f "$HERE/values-local.yaml" >&2
kubectl_ apply -k "$K8S_DIR/manifests/rbac" >&2              # classic install
kubectl_ apply -k "$K8S_DIR/manifests/rbac/gateway-api" >&2  # Gateway API install
kubectl_ apply -f "$HERE/manifests/gateway-sizer-defaults.yaml" >&2

# Every image the cluster runs must be one this script imported (imagePullPolicy Never would stall).
used=$(kubectl_ get pods,deployments,daemonsets,jobs -A -o jsonpath='{range ..containers[*]}{.image}{"\n"}{end}{range ..initContainers[*]}{.image}{"\n"}{end}' | sort -u)
for img in $used; do
    grep -qx "$img" <(cut -d= -f2 <<<"$IMAGE_REFS") \
        || die "a workload uses image $img, which no local image provides (k8s/images/build_images.py)"
done

phase "waiting for rollouts"
kubectl_ -n kube-system rollout status deployment/coredns --timeout=180s >&2
kubectl_ -n projectcontour wait --for=condition=Complete job --all --timeout=180s >&2
kubectl_ -n projectcontour rollout status deployment/contour --timeout=180s >&2
kubectl_ -n projectcontour rollout status daemonset/envoy --timeout=180s >&2
kubectl_ -n projectcontour rollout status deployment/contour-gateway-provisioner --timeout=180s >&2
provisioned() { kubectl_ --request-timeout=5s -n projectcontour get deployment/envoy-gateway-sizer deployment/contour-gateway-sizer >/dev/null 2>&1; }
wait_for "the provisioner's Contour and Envoy for Gateway gateway-sizer" 120 - provisioned
kubectl_ -n projectcontour rollout status deployment/contour-gateway-sizer --timeout=180s >&2
kubectl_ -n projectcontour rollout status deployment/envoy-gateway-sizer --timeout=180s >&2
kubectl_ -n monitoring rollout status deployment/prometheus --timeout=180s >&2
kubectl_ -n gateway-loadtest rollout status deployment/nginx --timeout=180s >&2
# The certgen Job's pod has finished; delete it so that every pod left is Running and Ready.
kubectl_ -n projectcontour delete job --all --wait=true >&2
kubectl_ wait --for=condition=Ready pods --all -A --timeout=180s >&2

phase "checks: HTTPProxy valid, Envoy answers for external.nginx"
proxy_valid() { [ "$(kubectl_ --request-timeout=5s -n gateway-loadtest get httpproxy nginx -o jsonpath='{.status.currentStatus}')" = valid ]; }
wait_for "HTTPProxy nginx valid" 60 - proxy_valid
ENVOY_IP=$(kubectl_ -n projectcontour get service envoy -o jsonpath='{.spec.clusterIP}')
envoy_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' -m 2 -H 'Host: external.nginx' "http://$ENVOY_IP/")" = 200 ]; }
wait_for "HTTP 200 from Envoy ($ENVOY_IP) for Host external.nginx" 60 - envoy_200

# ---------------------------------------------------------------- done
# For the record (down.sh finds them again, pods come and go): what the cluster has made so far.
our_cgroups >"$STATE_DIR/cgroups.created"
awk '{print $5}' /proc/self/mountinfo | grep -E "^($CLUSTER_DIR|$RUN_DIR|$CONTAINERD_ROOT|/run/netns/cni-)" \
    >"$STATE_DIR/mounts.at-up" || true
ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -vxF -f "$STATE_DIR/links.before" \
    >"$STATE_DIR/links.at-up" || true
trap - EXIT INT TERM
phase "cluster up in $(( $(date +%s) - t0 ))s"
cat >&2 <<EOF

  kubeconfig:  $ADMIN_KUBECONFIG
  Envoy:       curl -H 'Host: external.nginx' http://$ENVOY_IP/
  Prometheus:  http://$PROMETHEUS_SERVICE_IP:9090  (also via the API server's service proxy)
  tear down:   make cluster-down   (or: sudo k8s/cluster/down.sh)

EOF
echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
