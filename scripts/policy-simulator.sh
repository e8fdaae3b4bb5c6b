#!/usr/bin/env bash
# The NetworkPolicy simulator for tests only: cyclonus v0.5.6 (github.com/mattfenwick/cyclonus,
# the engine SIG Network's policy-assistant grew from; policy-assistant itself is not published as
# a Go module), built from Go modules like scripts/kube-local.sh's binaries. `cyclonus analyze
# --mode query-traffic` says whether NetworkPolicies allow each given flow between fake pods.
#
#   scripts/policy-simulator.sh build    build the pinned binary (once; cached) and print its path
#
# The binary goes to $SLURM_PLATFORM_KUBE (default ~/.cache/slurm-platform/kube)/cyclonus-0.5.6/bin,
# rebuilt when this script or scripts/kube/cyclonus/ (the pinned module and its go.sum) change.
set -euo pipefail

CYCLONUS_VERSION=v0.5.6

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=$here/kube/cyclonus
root=${SLURM_PLATFORM_KUBE:-$HOME/.cache/slurm-platform/kube}/cyclonus-${CYCLONUS_VERSION#v}
binary=$root/bin/cyclonus

fingerprint() {
	{
		cat "${BASH_SOURCE[0]}"
		find "$module" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

build() {
	command -v go >/dev/null || {
		echo "policy-simulator: go is required to build cyclonus" >&2
		exit 1
	}
	mkdir -p "$root/bin"
	exec 9>"$root/.lock"
	flock 9
	if [[ -x $binary && -f $root/.stamp && "$(cat "$root/.stamp")" == "$(fingerprint)" ]]; then
		echo "$binary"
		return
	fi
	echo "policy-simulator: building cyclonus $CYCLONUS_VERSION (cold build about 2 min; log: $root/build.log)" >&2
	rm -f "$root/.stamp"
	if ! (cd "$module" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
		nice -n 10 go build -ldflags "-s -w" -o "$root/bin/" github.com/mattfenwick/cyclonus/cmd/cyclonus) >"$root/build.log" 2>&1; then
		tail -n 30 "$root/build.log" >&2
		echo "policy-simulator: build failed; full log: $root/build.log" >&2
		exit 1
	fi
	fingerprint >"$root/.stamp"
	echo "$binary"
}

case ${1:-} in
build) build ;;
*)
	echo "usage: $0 build" >&2
	exit 2
	;;
esac
