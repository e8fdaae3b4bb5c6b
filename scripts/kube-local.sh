#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for tests and local trials only:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl v1.33.3, etcd
# v3.6.16, kwok v0.8.0 (fake nodes) and Kueue v0.19.2's controller-manager, all built
# from Go modules (no Docker).
#
#   scripts/kube-local.sh build              build the pinned binaries (once; cached)
#   scripts/kube-local.sh start [RUN_DIR]    start everything, print the kubeconfig path
#   scripts/kube-local.sh stop [RUN_DIR]     stop every process by its PID file (Kueue's too)
#   scripts/kube-local.sh kueue-pki RUN_DIR  Kueue's webhook CA and serving certificate (tests/kube.py)
#   scripts/kube-local.sh start-kueue RUN_DIR CONFIG   start Kueue's controller with CONFIG
#   scripts/kube-local.sh ensure [RUN_DIR]   start unless running, print the kubeconfig path
#   scripts/kube-local.sh kubeconfig [RUN_DIR]
#   scripts/kube-local.sh bin                the directory of the binaries (kubectl too)
#   scripts/kube-local.sh charts DIR         the kwok stack's stand-in charts
#
# Binaries go to $SLURM_PLATFORM_KUBE (default ~/.cache/slurm-platform/kube),
# outside the checkout, with one stamp per build step (its inputs: the pinned
# versions and Go environment, the step's build function and its wrapper module
# under scripts/kube/, so a change elsewhere in this script rebuilds nothing) and
# one progress line per step on stderr. Kueue's step also keeps its CRDs and
# webhook configurations from the same module (kueue/), which tests/kube.py
# registers before starting it.
# RUN_DIR (default <cache>/run) holds the throwaway PKI, the admin token (random,
# new on every start), etcd's data, logs, and one PID file per process ("PID
# STARTTIME": stop kills only the process it started). Every file of a run is
# private (umask 077: kubeconfig, tokens.csv and keys are 0600). etcd serves
# TLS only and takes only clients with a certificate of its own CA (the API
# server's), peers likewise. Every port is a free one on 127.0.0.1, chosen at
# start; every wait is bounded.
set -euo pipefail

KUBE_VERSION=v1.33.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
KUEUE_VERSION=v0.19.2
# Every Go step builds with this environment (a build step's stamp covers it).
GO_ENV=(GOTOOLCHAIN=local CGO_ENABLED=0 "GOFLAGS=-trimpath -buildvcs=false")

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
sources=$here/kube
root=${SLURM_PLATFORM_KUBE:-$HOME/.cache/slurm-platform/kube}/kube-${KUBE_VERSION#v}
bin=$root/bin
logs=$root/logs

log() { echo "kube-local: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# --- build ------------------------------------------------------------------

# fingerprint NAME MODULE_DIR: what build step NAME builds from.
fingerprint() {
	{
		echo "$KUBE_VERSION $ETCD_VERSION $KWOK_VERSION $KUEUE_VERSION ${GO_ENV[*]} $(go env GOVERSION)"
		declare -f go_build "build_$1"
		find "$sources/$2" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

all_exist() {
	local path
	for path in "$@"; do
		[[ -e $path ]] || return 1
	done
}

step_number=0
# step NAME EXPECTED MODULE_DIR OUTPUT... : runs build_NAME unless its stamp is current.
step() {
	local name=$1 expected=$2 module=$3 stamp
	shift 3
	step_number=$((step_number + 1))
	stamp=$root/.stamp-$name
	if [[ -f $stamp && "$(cat "$stamp")" == "$(fingerprint "$name" "$module")" ]] && all_exist "$@"; then
		return
	fi
	log "[$step_number/5] $name (cold build about $expected; log: $logs/$name.log)"
	rm -f "$stamp"
	local started=$SECONDS
	if ! (cd "$sources/$module" && "build_$name") >"$logs/$name.log" 2>&1; then
		tail -n 30 "$logs/$name.log" >&2
		die "$name failed; full log: $logs/$name.log"
	fi
	fingerprint "$name" "$module" >"$stamp"
	echo "$name $((SECONDS - started)) s" >>"$logs/durations"
}

go_build() { nice -n 10 go build -ldflags "-s -w ${LDFLAGS:-}" -o "$bin/" "$@"; }

build_control_plane() {
	local stamp="" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		stamp+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=33 -X $pkg.gitTreeState=clean"
	done
	LDFLAGS=$stamp go_build k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_etcd() { go_build -o "$bin/etcd" .; }

build_kwok() {
	go_build sigs.k8s.io/kwok/cmd/kwok
	"$bin/kwok" --version
}

# kwok's own stage files (shipped in its module) plus ours (scripts/kube/stages; our
# job-pod-complete in place of kwok's pod-complete).
build_stages() {
	local kwok_dir stages=$root/stages.yaml file
	kwok_dir=$(go -C "$sources/kwok" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	: >"$stages.tmp"
	for file in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
		{ echo "---"; cat "$kwok_dir/kustomize/stage/$file"; } >>"$stages.tmp"
	done
	for file in "$sources"/stages/*.yaml; do
		{ echo "---"; cat "$file"; } >>"$stages.tmp"
	done
	mv "$stages.tmp" "$stages"
}

# Kueue's controller-manager, and from the same module its CRDs and webhook configurations
# (service-based; tests/kube.py points them at the controller on loopback).
build_kueue() {
	local module_dir
	go_build sigs.k8s.io/kueue/cmd/kueue
	module_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
	rm -rf "$root/kueue"
	mkdir -p "$root/kueue/crds"
	cp "$module_dir"/config/components/crd/bases/*.yaml "$root/kueue/crds/"
	cp "$module_dir/config/components/webhook/manifests.yaml" "$root/kueue/webhooks.yaml"
	chmod -R u+w "$root/kueue"
}

build() {
	command -v go >/dev/null || die "go is required to build the control plane"
	mkdir -p "$bin" "$logs"
	exec 9>"$root/.lock"
	flock 9
	export "${GO_ENV[@]}"
	step control_plane "4-8 min" control-plane "$bin/kube-apiserver" "$bin/kube-controller-manager" "$bin/kube-scheduler" "$bin/kubectl"
	step etcd "1 min" etcd "$bin/etcd"
	step kwok "2 min" kwok "$bin/kwok"
	step stages "1 s" stages "$root/stages.yaml"
	step kueue "11 min" kueue "$bin/kueue" "$root/kueue/webhooks.yaml"
}

# --- run --------------------------------------------------------------------

# Three distinct free loopback ports, held open together while they are picked: three separate picks could be
# handed the same port (a CI run's etcd got the API server's, and the API server failed "address already in use").
free_ports() {
	python3 -c 'import socket; held = [socket.socket() for _ in range(3)]; [s.bind(("127.0.0.1", 0)) for s in held]; print(*(s.getsockname()[1] for s in held))'
}

# The throwaway PKI of a run: the API server's CA and serving certificate, the
# service-account key pair, and etcd's own CA (so no certificate the API server
# accepts from its clients opens etcd) with etcd's serving/peer certificate and
# the API server's etcd client certificate.
pki() {
	local dir=$1/pki
	mkdir -p "$dir"
	(
		cd "$dir"
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=slurm-platform-local-ca -keyout ca.key -out ca.crt
		openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >san.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out apiserver.crt
		openssl genrsa -out sa.key 2048
		openssl rsa -in sa.key -pubout -out sa.pub
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=slurm-platform-local-etcd-ca -keyout etcd-ca.key -out etcd-ca.crt
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >etcd-san.ext
		openssl req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout etcd.key -out etcd.csr
		openssl x509 -req -in etcd.csr -CA etcd-ca.crt -CAkey etcd-ca.key -CAcreateserial -days 2 -extfile etcd-san.ext -out etcd.crt
		printf 'extendedKeyUsage=clientAuth\n' >etcd-client.ext
		openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver-etcd-client -keyout etcd-client.key -out etcd-client.csr
		openssl x509 -req -in etcd-client.csr -CA etcd-ca.crt -CAkey etcd-ca.key -CAcreateserial -days 2 -extfile etcd-client.ext -out etcd-client.crt
	) >"$1/logs/pki.log" 2>&1
}

# A new random admin token for this run (the old one stops working at the API server's restart).
new_admin_token() {
	# token,user,uid,groups: the admin and the control plane's own components.
	printf '%s,admin,admin,system:masters\n' "$(openssl rand -hex 32)" >"$1/pki/tokens.csv"
}

admin_token() { cut -d, -f1 "$1/pki/tokens.csv"; }

kubeconfig() {
	local run=$1 port=$2 token
	token=$(admin_token "$run")
	cat >"$run/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kwok
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $run/pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: kwok
  context: {cluster: kwok, user: admin}
current-context: kwok
EOF
}

# launch RUN NAME ARGS...: start one process in its own session, log and PID file in RUN.
launch() {
	local run=$1 name=$2
	shift 2
	# Appends (a restart keeps the crash's log); fd 9, the build lock, stays with us.
	setsid "$@" >>"$run/logs/$name.log" 2>&1 </dev/null 9>&- &
	# The start time tells this process from a later one that reuses its PID.
	echo "$! $(start_time $!)" >"$run/pids/$name.pid"
}

# start_time PID: the process's start time in clock ticks since boot (/proc/PID/stat field 22), or nothing.
start_time() {
	local stat fields
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) } # after the command name, which may hold spaces and parentheses
	read -r -a fields <<<"$stat"
	echo "${fields[19]}"
}

# alive PID_FILE: the process the file names runs and is the one this script started.
alive() {
	local pid started
	[[ -f $1 ]] || return 1
	read -r pid started <"$1" || true
	[[ $pid =~ ^[0-9]+$ && -n $started ]] && kill -0 "$pid" 2>/dev/null && [[ "$(start_time "$pid")" == "$started" ]]
}

# wait_for SECONDS WHAT COMMAND...: bounded polling.
wait_for() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

api_ready() {
	curl -sf --max-time 2 --cacert "$1/pki/ca.crt" -H "Authorization: Bearer $(admin_token "$1")" "https://127.0.0.1:$2/readyz"
}

etcd_healthy() {
	curl -sf --max-time 2 --cacert "$1/pki/etcd-ca.crt" --cert "$1/pki/etcd-client.crt" --key "$1/pki/etcd-client.key" \
		"https://127.0.0.1:$2/health"
}

start_etcd() {
	local run=$1 pki=$1/pki
	# shellcheck source=/dev/null
	. "$run/ports.env"
	# Clients and peers over TLS, each with a certificate of etcd's own CA.
	launch "$run" etcd "$bin/etcd" --name local --data-dir "$run/etcd" \
		--listen-client-urls "https://127.0.0.1:$ETCD_PORT" --advertise-client-urls "https://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "https://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "https://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "local=https://127.0.0.1:$ETCD_PEER_PORT" \
		--cert-file "$pki/etcd.crt" --key-file "$pki/etcd.key" --client-cert-auth --trusted-ca-file "$pki/etcd-ca.crt" \
		--peer-cert-file "$pki/etcd.crt" --peer-key-file "$pki/etcd.key" --peer-client-cert-auth --peer-trusted-ca-file "$pki/etcd-ca.crt" \
		--unsafe-no-fsync --quota-backend-bytes 1073741824
	wait_for 30 etcd etcd_healthy "$run" "$ETCD_PORT" || die "etcd not healthy in 30 s: $run/logs/etcd.log"
}

start_apiserver() {
	local run=$1 pki=$1/pki
	# shellcheck source=/dev/null
	. "$run/ports.env"
	launch "$run" kube-apiserver "$bin/kube-apiserver" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
		--secure-port "$API_PORT" --etcd-servers "https://127.0.0.1:$ETCD_PORT" \
		--etcd-cafile "$pki/etcd-ca.crt" --etcd-certfile "$pki/etcd-client.crt" --etcd-keyfile "$pki/etcd-client.key" \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
		--token-auth-file "$pki/tokens.csv" --authorization-mode Node,RBAC \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
		--service-account-signing-key-file "$pki/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
		--endpoint-reconciler-type none --allow-privileged
	wait_for 60 kube-apiserver api_ready "$run" "$API_PORT" || die "kube-apiserver not ready in 60 s: $run/logs/kube-apiserver.log"
}

start() {
	local run=${1:-$root/run} name
	[[ -x $bin/kube-apiserver && -f $root/stages.yaml ]] || build
	mkdir -p "$run/logs" "$run/pids"
	run=$(cd "$run" && pwd)
	for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
		! alive "$run/pids/$name.pid" || die "$name already runs in $run (pid $(cut -d' ' -f1 "$run/pids/$name.pid")); stop it first"
	done
	# A run dir of an older version (plain-HTTP etcd, no etcd PKI) starts over: its data is throwaway.
	if [[ ! -f $run/pki/etcd-client.crt ]]; then
		rm -rf "$run/pki" "$run/etcd" "$run/ports.env"
		pki "$run"
	fi
	if [[ ! -f $run/ports.env ]]; then
		local etcd_port etcd_peer_port api_port
		read -r etcd_port etcd_peer_port api_port < <(free_ports)
		cat >"$run/ports.env" <<EOF
ETCD_PORT=$etcd_port
ETCD_PEER_PORT=$etcd_peer_port
API_PORT=$api_port
EOF
	fi
	# shellcheck source=/dev/null
	. "$run/ports.env"
	new_admin_token "$run"
	kubeconfig "$run" "$API_PORT"
	local started=$SECONDS
	start_etcd "$run"
	start_apiserver "$run"
	cluster_basics "$run"
	# Controllers act with per-controller service accounts: node lifecycle and
	# the scheduler need them to place pods on kwok's fake nodes. At the default
	# client QPS (20) binding 300 claims alone took 58 s (issue 21): a managed
	# cluster's controllers are not that slow, and the tests and benchmarks
	# should measure our program, not this throttle.
	launch "$run" kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$run/kubeconfig" \
		--kube-api-qps 200 --kube-api-burst 400 \
		--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file "$run/pki/sa.key" --root-ca-file "$run/pki/ca.crt" \
		--controllers '*,-bootstrapsigner,-tokencleaner' --node-monitor-grace-period 40s
	launch "$run" kube-scheduler "$bin/kube-scheduler" --kubeconfig "$run/kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false
	launch "$run" kwok "$bin/kwok" --kubeconfig "$run/kubeconfig" --config "$root/stages.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--node-ip 127.0.0.1 --node-lease-duration-seconds 40
	sleep 1
	for name in kube-controller-manager kube-scheduler kwok; do
		alive "$run/pids/$name.pid" || die "$name exited at start: $run/logs/$name.log"
	done
	log "control plane up on https://127.0.0.1:$API_PORT in $((SECONDS - started)) s (run dir $run)"
	echo "$run/kubeconfig"
}

# Kueue's webhook PKI in RUN/kueue, for its internal cert management to adopt: a CA named
# kueue-ca (the name its rotator checks) and a serving certificate for its Service's DNS name
# and for 127.0.0.1, where the API server calls it (no ClusterIP routes here). Both outlive
# the rotator's 90-day renewal lookahead, else it would replace them with DNS-only ones.
kueue_pki() {
	local dir=$1/kueue service=$2
	mkdir -p "$dir/certs"
	(
		cd "$dir"
		openssl genrsa -traditional -out ca.key 2048
		openssl req -x509 -new -key ca.key -days 365 -subj /O=kueue/CN=kueue-ca \
			-addext subjectAltName=DNS:kueue-ca -addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign -out ca.crt
		openssl genrsa -traditional -out certs/tls.key 2048
		openssl req -new -key certs/tls.key -subj "/CN=$service" -out tls.csr
		printf 'subjectAltName=DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' "$service" >tls.ext
		openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile tls.ext -out certs/tls.crt
	) >"$1/logs/kueue-pki.log" 2>&1 || die "Kueue's PKI failed: $1/logs/kueue-pki.log"
}

# start_kueue RUN CONFIG: Kueue's controller against this API server, with its Configuration CONFIG
# (webhooks, CRDs and its cert Secret already registered by the caller).
start_kueue() {
	local run=$1 config=$2
	[[ -x $bin/kueue ]] || build
	! alive "$run/pids/kueue.pid" || die "kueue already runs in $run; stop it first"
	launch "$run" kueue "$bin/kueue" --config "$config" --kubeconfig "$run/kubeconfig" --zap-log-level 2
	sleep 1
	alive "$run/pids/kueue.pid" || die "kueue exited at start: $run/logs/kueue.log"
}

stop_one() {
	local pid_file=$1 pid
	alive "$pid_file" || {
		# Gone, or its PID now belongs to another process, which is not ours to kill.
		[[ ! -f $pid_file ]] || ! kill -0 "$(cut -d' ' -f1 "$pid_file")" 2>/dev/null ||
			log "$(basename "$pid_file" .pid): pid $(cut -d' ' -f1 "$pid_file") is no longer the process this script started; not killing it"
		rm -f "$pid_file"
		return 0
	}
	read -r pid _ <"$pid_file"
	kill -TERM "$pid"
	wait_for 15 "$pid" bash -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
	rm -f "$pid_file"
}

stop() {
	local run=${1:-$root/run} name
	[[ -d $run/pids ]] || return 0
	for name in kueue kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
		stop_one "$run/pids/$name.pid"
	done
}

# The stand-in charts (scripts/kube/charts), into DEST.
charts() {
	local dest=${1:?destination directory}
	rm -rf "$dest"
	mkdir -p "$dest"
	cp -r "$sources/charts/." "$dest/"
	# soperator 4.1.7's CRDs chart carries the contract's CRDs. It takes over the SlurmCluster CRD that
	# `start` applied (field manager kube-local) with pulumi.com/patchForce, as the real 4.1.7 chart
	# updates the one the 1.14.10 chart made.
	local crds=$dest/soperator-4.1.7/helm-soperator-crds/crds contract
	mkdir -p "$crds"
	for contract in "$here/../contracts/soperator/4.1.7/"*.json; do
		sed 's|^ "metadata": {$| "metadata": {"annotations": {"pulumi.com/patchForce": "true"},|' "$contract" >"$crds/${contract##*/}"
		grep -q patchForce "$crds/${contract##*/}" || die "no metadata line to annotate in $contract"
	done
	# Kueue's stand-in (and 0.19.1's, whose crds/ links to it) carries the 0.19.2 contract's CRDs, as the real
	# chart installs them with its release.
	mkdir -p "$dest/kueue/crds"
	cp "$here/../contracts/kueue/v0.19.2/"*.json "$dest/kueue/crds/"
}

# What a managed cluster has before any stack: the upstream CRDs the project
# carries in contracts/ that no stand-in chart supplies (soperator 1.14.10's
# SlurmCluster, which kwok's stages watch, so it must exist before kwok starts,
# and Slinky's; nothing in a stack owns them, so no destroy takes every custom
# resource with it), and a default StorageClass (claims that name no class,
# e.g. LDAP's, get it; the kwok stage provisions them).
cluster_basics() {
	local run=$1 contracts kubectl=("$bin/kubectl" --kubeconfig "$1/kubeconfig")
	contracts=$(cd "$here/.." && pwd)/contracts
	[[ -f $contracts/soperator/1.14.10/slurm.nebius.ai_slurmclusters.json ]] || die "no contracts at $contracts"
	{
		"${kubectl[@]}" apply --server-side --field-manager kube-local \
			-f "$contracts/soperator/1.14.10/" -f "$contracts/slinky/v1.2.1/" &&
			"${kubectl[@]}" apply --server-side --field-manager kube-local -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: kwok-default
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kwok.x-k8s.io/volume
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
	} >"$run/logs/basics.log" 2>&1 || die "applying CRDs and the default StorageClass failed: $run/logs/basics.log"
	# Retried: `kubectl wait` fails on a CRD that has no conditions yet.
	wait_for 30 crds "${kubectl[@]}" wait --for condition=Established --timeout 5s crd --all ||
		die "the contracts' CRDs were not established in 30 s"
	# kwok's stages read the OpenAPI v3 document of the kinds they watch, published a moment after Established.
	wait_for 30 openapi "${kubectl[@]}" get --raw /openapi/v3/apis/slurm.nebius.ai/v1 ||
		die "the SlurmCluster OpenAPI document was not published in 30 s"
}

# A running control plane in RUN_DIR, started if it is not: prints the kubeconfig path.
ensure() {
	local run=${1:-$root/run}
	if alive "$run/pids/kube-apiserver.pid" && alive "$run/pids/etcd.pid" && alive "$run/pids/kwok.pid"; then
		echo "$run/kubeconfig"
	else
		stop "$run"
		start "$run"
	fi
}

# Everything a run writes (keys, tokens.csv, kubeconfig, etcd data, logs) is private to us.
[[ ${1:-} == build || ${1:-} == bin || ${1:-} == kubeconfig ]] || umask 077

case ${1:-} in
build) build ;;
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
ensure) ensure "${2:-}" ;;
charts) charts "${2:-}" ;;
bin) echo "$bin" ;;
kubeconfig) echo "${2:-$root/run}/kubeconfig" ;;
# Restart one stopped process of a running control plane (fault tests).
restart-etcd) start_etcd "${2:?run dir}" ;;
restart-apiserver) start_apiserver "${2:?run dir}" ;;
kueue-pki) kueue_pki "${2:?run dir}" "${3:?webhook service DNS name}" ;;
start-kueue) start_kueue "${2:?run dir}" "${3:?Kueue Configuration file}" ;;
*) die "usage: $0 build | start [RUN_DIR] | stop [RUN_DIR] | ensure [RUN_DIR] | kubeconfig [RUN_DIR] | charts DIR | kueue-pki RUN_DIR DNS_NAME | start-kueue RUN_DIR CONFIG" ;;
esac
