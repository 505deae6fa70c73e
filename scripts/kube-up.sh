#!/usr/bin/env bash
# A small real Kubernetes control plane on loopback, for tests and for trying vole:
# etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler, kubemark's hollow nodes),
# the programs scripts/peers.sh builds.
#
#   scripts/kube-up.sh DIR [--with-controller-manager [--controllers LIST]] [--with-scheduler]
#                          [--hollow-nodes NAME[,NAME...]] [--node-kubeconfig NODE]...
#
# A hollow node is kubemark --morph=kubelet: the real kubelet (its volume manager and volume
# plugins) over a fake container runtime and the fake image service, needing no cgroups. Each
# gets a free kubelet port (the read-only port off). kubemark makes its root directory as
# /tmp/hollow-kubelet.XXXXXXXXXX (TMPDIR is not read); the line "hollow node NAME: root dir
# PATH" (stderr) and DIR/hollow-nodes ("name rootdir" a line) name it, and kube-down.sh
# removes it. Returns once each is Ready.
#
# Everything lives in DIR (created): a CA and serving certificate (openssl), service-account
# keys, a static token for the admin (group system:masters), etcd's data, one log per
# program, DIR/audit.log (each request's user, verb, object and status code),
# DIR/kubeconfig (admin) and DIR/pids ("name pid" a line). Ports are free
# 127.0.0.1 ports. Returns once the API server's /readyz (and the controller manager's
# /healthz) answer ok. `scripts/kube-down.sh DIR` stops exactly the processes in DIR/pids;
# `scripts/kube-restart.sh DIR NAME` kills one (SIGKILL) and starts it again, as a crash would.
#
# The API server authorizes as a cluster's does (--authorization-mode Node,RBAC), admits
# with NodeRestriction, and takes client certificates signed by DIR's CA. Each
# --node-kubeconfig NODE mints a node's own identity, as kubelet TLS bootstrapping ends
# with: a client certificate with CN system:node:NODE and O system:nodes signed by the
# cluster CA, in DIR/node-NODE.kubeconfig (its path is printed). The Node authorizer then
# lets it read only its own Node and the objects of the pods bound to it. On a DIR whose
# control plane runs already, kube-up.sh only mints them.
# Env: VOLE_PEERS_BIN (a directory of built peers; otherwise scripts/peers.sh builds them),
# VOLE_KUBE_READY_TIMEOUT_S (default 120), VOLE_KCM_FLAGS (more kube-controller-manager flags,
# split on spaces, e.g. "--node-monitor-grace-period=15s"), VOLE_KUBEMARK_FLAGS (more flags of
# each hollow node, e.g. "--max-pods=1100": a kubelet admits 110 pods by default).
set -Eeuo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf 'kube-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage="kube-up.sh DIR [--with-controller-manager [--controllers LIST]] [--with-scheduler]"
usage+=" [--hollow-nodes NAME[,NAME...]] [--node-kubeconfig NODE]..."
[ $# -ge 1 ] || die "usage: $usage"
dir="$(mkdir -p "$1" && cd "$1" && pwd)"; shift
with_kcm=false controllers='*' with_scheduler=false hollow_nodes=() nodes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-controller-manager) with_kcm=true ;;
    --controllers) [ $# -ge 2 ] || die "--controllers needs a list"; controllers="$2"; shift ;;
    --with-scheduler) with_scheduler=true ;;
    --hollow-nodes)
      [ $# -ge 2 ] || die "--hollow-nodes needs a list of node names"
      IFS=, read -r -a hollow_nodes <<<"$2"; shift ;;
    --node-kubeconfig)
      [ $# -ge 2 ] || die "--node-kubeconfig needs a node name"
      [[ "$2" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "'$2' is not a node name (RFC 1123)"
      nodes+=("$2"); shift ;;
    *) die "unknown argument '$1'" ;;
  esac
  shift
done

# A node's client certificate (CN system:node:NODE, O system:nodes, clientAuth) signed by
# the CA, and a kubeconfig with it for the API server of DIR/kubeconfig: its path on stdout.
mint_node_kubeconfig() {
  local node="$1" pki="$dir/pki" server
  server="$(sed -n 's/^ *server: //p' "$dir/kubeconfig")"
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$node" \
    -keyout "$pki/node-$node.key" -out "$pki/node-$node.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
    >"$pki/node-$node.ext"
  openssl x509 -req -in "$pki/node-$node.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$pki/node-$node.ext" -out "$pki/node-$node.crt" \
    2>/dev/null
  cat >"$dir/node-$node.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: vole
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: system:node:$node
  user:
    client-certificate: $pki/node-$node.crt
    client-key: $pki/node-$node.key
contexts:
- name: vole
  context: {cluster: vole, user: "system:node:$node"}
current-context: vole
KUBECONFIG
  log "minted $dir/node-$node.kubeconfig (system:node:$node, group system:nodes)"
  echo "$dir/node-$node.kubeconfig"
}

if [ -s "$dir/pids" ]; then
  { [ ${#nodes[@]} -gt 0 ] && ! $with_kcm && ! $with_scheduler && [ ${#hollow_nodes[@]} -eq 0 ]; } ||
    die "$dir/pids exists: run scripts/kube-down.sh $dir first"
  { [ -s "$dir/kubeconfig" ] && [ -s "$dir/pki/ca.key" ]; } || die "$dir holds no control plane"
  for node in "${nodes[@]}"; do mint_node_kubeconfig "$node"; done
  exit 0
fi
ready_timeout_s="${VOLE_KUBE_READY_TIMEOUT_S:-120}"

names=(etcd kube-apiserver kubectl)
$with_kcm && names+=(kube-controller-manager)
$with_scheduler && names+=(kube-scheduler)
[ ${#hollow_nodes[@]} -eq 0 ] || names+=(kubemark)
for n in "${hollow_nodes[@]}"; do
  [[ "$n" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "hollow node name '$n' is not a DNS label"
done
bin="${VOLE_PEERS_BIN:-}"
[ -n "$bin" ] || bin="$(bash "$root/scripts/peers.sh" "${names[@]}" | tail -n 1)"
for n in "${names[@]}"; do [ -x "$bin/$n" ] || die "no $n in $bin"; done

free_port() {
  node -e "const s=require('net').createServer();
    s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# On any failure from here on, stop what was started (by PID) and show why.
cleanup_on_error() {
  log "failed; logs in $dir/*.log"
  for f in "$dir"/*.log; do [ -f "$f" ] && { log "--- tail $f"; tail -n 15 "$f" >&2; }; done
  bash "$root/scripts/kube-down.sh" "$dir" || true
}
trap cleanup_on_error ERR

# Started in the background with its output in DIR/NAME.log; its PID goes to DIR/pids and
# its command line to DIR/NAME.cmd (scripts/kube-restart.sh starts it again from there).
start() {
  local name="$1"; shift
  printf '%q ' "$@" >"$dir/$name.cmd"
  "$@" </dev/null >"$dir/$name.log" 2>&1 &
  echo "$name $!" >>"$dir/pids"
  log "started $name (pid $!)"
}

# Polls until the command succeeds, or fails after the ready timeout naming WHAT.
wait_for() {
  local what="$1" pid="$2"; shift 2
  local deadline=$((SECONDS + ready_timeout_s))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { log "$what exited"; return 1; }
    [ $SECONDS -lt $deadline ] || { log "$what not ready after ${ready_timeout_s} s"; return 1; }
    sleep 0.3
  done
}

make_pki() {
  local pki="$dir/pki"
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=vole-kube-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,%s\n' \
    'DNS:kubernetes.default,DNS:kubernetes.default.svc' >"$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  token="$(openssl rand -hex 24)"
  echo "$token,admin,admin,system:masters" >"$pki/tokens.csv"
  # DIR/audit.log: deploy/audit-policy.yaml (the changes vole import --audit-log reads,
  # with their objects), then every other request's user, verb, object and answer (no
  # bodies), so a test can tell what a client asked for and what it was refused.
  { cat "$root/deploy/audit-policy.yaml"
    printf '%s\n' '  - level: Metadata' '    omitStages: [RequestReceived]'; } >"$dir/audit-policy.yaml"
}

write_kubeconfig() {
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vole
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $dir/pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: vole
  context: {cluster: vole, user: admin}
current-context: vole
EOF
}

: >"$dir/pids"
make_pki
etcd_port="$(free_port)" peer_port="$(free_port)" api_port="$(free_port)"
start etcd "$bin/etcd" --name vole --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "vole=http://127.0.0.1:$peer_port"
etcd_pid=$!
wait_for etcd "$etcd_pid" curl -sf "http://127.0.0.1:$etcd_port/health"

start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
  --cert-dir "$dir/pki" --token-auth-file "$dir/pki/tokens.csv" \
  --client-ca-file "$dir/pki/ca.crt" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" \
  --service-account-key-file "$dir/pki/sa.pub" \
  --service-account-signing-key-file "$dir/pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
  --endpoint-reconciler-type none
api_pid=$!
write_kubeconfig
wait_for kube-apiserver "$api_pid" sh -c "curl -sf --cacert '$dir/pki/ca.crt' \
  -H 'Authorization: Bearer $token' https://127.0.0.1:$api_port/readyz | grep -qx ok"

if $with_kcm; then
  kcm_port="$(free_port)"
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/kubeconfig" --controllers "$controllers" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" --cert-dir "$dir/pki/kcm" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials=false ${VOLE_KCM_FLAGS:-}
  kcm_pid=$!
  wait_for kube-controller-manager "$kcm_pid" \
    sh -c "curl -sfk https://127.0.0.1:$kcm_port/healthz | grep -qx ok"
fi
if $with_scheduler; then
  sched_port="$(free_port)"
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$dir/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$sched_port" --cert-dir "$dir/pki/scheduler"
  sched_pid=$!
  wait_for kube-scheduler "$sched_pid" \
    sh -c "curl -sfk https://127.0.0.1:$sched_port/healthz | grep -qx ok"
fi

# The root directory kubemark made (under /tmp), as its log names it.
hollow_root() { sed -n 's/.*Using \(.*\) as root dir for hollow-kubelet.*/\1/p' "$1" | head -n 1; }
node_ready() {
  "$bin/kubectl" --kubeconfig "$dir/kubeconfig" get node "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}
for name in "${hollow_nodes[@]}"; do
  start "hollow-$name" "$bin/kubemark" --morph=kubelet \
    --name "$name" --kubeconfig "$dir/kubeconfig" --use-host-image-service=false \
    --kubelet-port "$(free_port)" --kubelet-read-only-port 0 ${VOLE_KUBEMARK_FLAGS:-}
  hollow_pid=$!
  wait_for "hollow node $name" "$hollow_pid" node_ready "$name"
  hollow_dir="$(hollow_root "$dir/hollow-$name.log")"
  [ -n "$hollow_dir" ] || die "hollow node $name: its log names no root dir"
  echo "$name $hollow_dir" >>"$dir/hollow-nodes"
  log "hollow node $name: root dir $hollow_dir"
done
for node in "${nodes[@]}"; do mint_node_kubeconfig "$node"; done
trap - ERR
log "ready: kubectl --kubeconfig $dir/kubeconfig (API https://127.0.0.1:$api_port)"
echo "$dir/kubeconfig"
