#!/usr/bin/env bash
# Prometheus for tests and benchmarks: prometheus and promtool v0.316.0 (github.com/prometheus/prometheus)
# and node_exporter v1.10.1 (github.com/prometheus/node_exporter, the version of
# monitoring.slurmExporter.nodeExporterVersion's default), built from Go modules like
# scripts/policy-simulator.sh's cyclonus. `promtool check rules` and `promtool test rules` check the
# recording rules and alerts components/monitoring/rules.py renders; prometheus and node_exporter
# scrape the Slurm exporter's file as the cluster does.
#
#   scripts/prometheus-local.sh build    build the pinned binaries (once; cached) and print their directory
#
# The binaries go to $SLURM_PLATFORM_KUBE (default ~/.cache/slurm-platform/kube)/prometheus-0.316.0/bin,
# rebuilt when this script or scripts/kube/prometheus/ (the pinned modules and their go.sum) change.
# node_exporter has a module of its own (scripts/kube/prometheus/node-exporter): in Prometheus's, Go's
# version selection would hand it the newer github.com/prometheus/procfs Prometheus requires, which
# node_exporter 1.10 does not compile against.
set -euo pipefail

PROMETHEUS_VERSION=v0.316.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=$here/kube/prometheus
root=${SLURM_PLATFORM_KUBE:-$HOME/.cache/slurm-platform/kube}/prometheus-${PROMETHEUS_VERSION#v}
bin=$root/bin

fingerprint() {
	{
		cat "${BASH_SOURCE[0]}"
		find "$module" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

# Packages of the module in $1, into $bin.
go_build() {
	local dir=$1
	shift
	(cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
		nice -n 10 go build -ldflags "-s -w" -o "$bin/" "$@")
}

build() {
	command -v go >/dev/null || {
		echo "prometheus-local: go is required to build prometheus, promtool and node_exporter" >&2
		exit 1
	}
	mkdir -p "$bin"
	exec 9>"$root/.lock"
	flock 9
	if [[ -x $bin/prometheus && -x $bin/promtool && -x $bin/node_exporter && -f $root/.stamp && "$(cat "$root/.stamp")" == "$(fingerprint)" ]]; then
		echo "$bin"
		return
	fi
	echo "prometheus-local: building prometheus $PROMETHEUS_VERSION, promtool and node_exporter (cold build about 6 min; log: $root/build.log)" >&2
	rm -f "$root/.stamp"
	if ! {
		go_build "$module" github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool &&
			go_build "$module/node-exporter" github.com/prometheus/node_exporter
	} >"$root/build.log" 2>&1; then
		tail -n 30 "$root/build.log" >&2
		echo "prometheus-local: build failed; full log: $root/build.log" >&2
		exit 1
	fi
	fingerprint >"$root/.stamp"
	echo "$bin"
}

case ${1:-} in
build) build ;;
*)
	echo "usage: $0 build" >&2
	exit 2
	;;
esac
