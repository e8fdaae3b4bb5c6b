#!/usr/bin/env bash
# Builds the Pulumi toolchain this project runs on from Go modules (no vendor
# binary downloads) into a project-private cache outside the checkout, and
# prints the path of an env file to source as the last line of stdout:
#
#   . "$(scripts/install-pulumi.sh)"   # sets PATH and PULUMI_HOME
#
# Progress goes to stderr, one line per step; Go's output goes to log files in
# the cache and is shown only when a step fails. Re-running is a no-op while
# this script and scripts/toolchain/ are unchanged (one stamp per step).
#
# What is built (VERSIONS in the cache root records the same):
#   bin/pulumi                   CLI, github.com/pulumi/pulumi/pkg/v3 v3.220.0: the newest
#                                CLI that still starts Python policy packs through
#                                pulumi-analyzer-policy-python (v3.222.0 moved to RunPlugin,
#                                which the v3.79.0 host does not implement for packs).
#   bin/pulumi-language-python-v3.79.0
#                                Python language host, github.com/pulumi/pulumi/sdk/v3 v3.79.0,
#                                the last sdk/v3 release that contains it; plus its
#                                pulumi-language-python-exec and pulumi-analyzer-policy-python.
#   bin/pulumi-language-python   what the CLI starts: scripts/toolchain/pulumi-language-python/
#                                wrapper, which hands that host Pulumi.yaml's
#                                `runtime.options.virtualenv` (.venv) as its -virtualenv flag, the
#                                only way v3.79.0 reads it; CLI v3.220.0 passes no options as flags.
#   plugin kubernetes            github.com/pulumi/pulumi-kubernetes/provider/v4 at the only
#                                version the proxy serves: commit f47bc2d6f199 (2026-01-15),
#                                after v4.24.1 and before v4.25.0. It reports
#                                4.24.1+git.20260115033456.f47bc2d6f199: the engine only loads a
#                                plugin whose version equals the SDK's (build metadata aside), and
#                                requirements.txt pins the Python SDK to 4.24.1.
#   plugin random                Terraform's random provider v3.6.3 bridged with
#                                pulumi-terraform-bridge v3.122.0 (scripts/toolchain/
#                                pulumi-resource-random), serving the pulumi-random 4.21.4
#                                SDK's tokens; it reports 4.21.4+tfrandom.3.6.3.
#
# A complete, normally installed Pulumi (CLI and pulumi-language-python on PATH)
# is reused as is: the env file then changes nothing.
#
# Environment: SLURM_PLATFORM_TOOLCHAIN (cache root, default
# ~/.cache/slurm-platform/toolchain) and the usual Go variables.
set -euo pipefail

CLI_VERSION=v3.220.0
HOST_VERSION=v3.79.0
K8S_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
K8S_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
# The checksum database has no record of this pseudo-version: pin its hash here.
K8S_MODULE_SUM=h1:j2bphCf7c2YhnBrhwht2f3TNRRgcMImltUlAgzxr9H4=
K8S_PLUGIN_VERSION=4.24.1+git.20260115033456.f47bc2d6f199
RANDOM_PLUGIN_VERSION=4.21.4+tfrandom.3.6.3

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
sources=$here/toolchain
root=${SLURM_PLATFORM_TOOLCHAIN:-$HOME/.cache/slurm-platform/toolchain}/pulumi-${CLI_VERSION#v}
bin=$root/bin
providers=$root/providers
home=$root/home
logs=$root/logs
env_file=$root/env.sh

log() { echo "install-pulumi: $*" >&2; }

external_pulumi() {
	local cli host
	cli=$(command -v pulumi || true)
	host=$(command -v pulumi-language-python || true)
	[[ -n $cli && -n $host && $cli != "$bin/pulumi" ]]
}

if external_pulumi; then
	mkdir -p "$root"
	echo "# A complete Pulumi is installed on PATH ($(command -v pulumi)): nothing to set." >"$env_file"
	log "reusing $(command -v pulumi) ($(pulumi version 2>/dev/null || echo 'unknown version'))"
	echo "$env_file"
	exit 0
fi

mkdir -p "$bin" "$providers" "$home" "$logs"
# One build at a time (e.g. two `make` runs); every step re-checks its stamp.
exec 9>"$root/.lock"
flock 9

command -v go >/dev/null || {
	log "go is required to build the Pulumi toolchain"
	exit 1
}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
# Modules the checksum database does not know; go.sum and K8S_MODULE_SUM pin them.
export GONOSUMDB=github.com/pulumi,github.com/terraform-providers
export PULUMI_HOME=$home PULUMI_SKIP_UPDATE_CHECK=true
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# The inputs of a step: this script and the step's wrapper module, if any.
fingerprint() {
	{
		cat "$self"
		[[ -z ${1:-} ]] || find "$sources/$1" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

all_exist() {
	local path
	for path in "$@"; do
		[[ -e $path ]] || return 1
	done
}

steps_total=4
step_number=0
# step NAME EXPECTED MODULE_DIR OUTPUT... : runs build_NAME (in a subshell) unless its stamp is current.
step() {
	local name=$1 expected=$2 module=$3 stamp
	shift 3
	step_number=$((step_number + 1))
	stamp=$root/.stamp-$name
	if [[ -f $stamp && "$(cat "$stamp")" == "$(fingerprint "$module")" ]] && all_exist "$@"; then
		return
	fi
	log "[$step_number/$steps_total] $name (cold build about $expected; log: $logs/$name.log)"
	rm -f "$stamp"
	# In the background, then waited for: bash ignores errexit inside a function run as an `if`
	# condition, so a failed command in the middle of a step would not fail it.
	"build_$name" >"$logs/$name.log" 2>&1 &
	if ! wait $!; then
		tail -n 30 "$logs/$name.log" >&2
		log "$name failed; full log: $logs/$name.log"
		exit 1
	fi
	fingerprint "$module" >"$stamp"
}

build_cli() (
	go -C "$sources/pulumi-cli" build \
		-ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$CLI_VERSION" \
		-o "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
)

build_python_host() (
	local sdk
	go -C "$sources/pulumi-language-python" build \
		-ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$HOST_VERSION" \
		-o "$bin/pulumi-language-python-$HOST_VERSION" github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python
	go -C "$sources/pulumi-language-python" build -ldflags "-s -w" -o "$bin/pulumi-language-python" ./wrapper
	sdk=$(go -C "$sources/pulumi-language-python" list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
	install -m 755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-analyzer-policy-python" "$bin/"
)

build_kubernetes() (
	local json sum dir
	json=$(cd "$work" && go mod download -json "$K8S_MODULE@$K8S_MODULE_VERSION")
	sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$json")
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
	if [[ $sum != "$K8S_MODULE_SUM" ]]; then
		echo "checksum mismatch for $K8S_MODULE@$K8S_MODULE_VERSION: got '$sum', want $K8S_MODULE_SUM"
		return 1
	fi
	# Its go.mod replaces the sdk module with ../sdk and the plugin embeds a
	# schema generated at build time: build from a writable copy.
	cp -r "$dir" "$work/kubernetes"
	chmod -R u+w "$work/kubernetes"
	cd "$work/kubernetes"
	go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4
	# The go:generate step of cmd/pulumi-resource-kubernetes, as its Makefile runs it.
	(cd cmd/pulumi-resource-kubernetes && VERSION=$K8S_PLUGIN_VERSION GOFLAGS="$GOFLAGS -mod=mod" go run generate.go)
	GOFLAGS="$GOFLAGS -mod=mod" go build \
		-ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PLUGIN_VERSION" \
		-o "$providers/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes
	"$bin/pulumi" plugin rm resource kubernetes --all --yes
	"$bin/pulumi" plugin install resource kubernetes "$K8S_PLUGIN_VERSION" --reinstall \
		--file "$providers/pulumi-resource-kubernetes"
)

build_random() (
	# The schema and bridge metadata are embedded: generate them with tfgen into
	# a writable copy (the module carries `{}` placeholders), then build.
	cp -r "$sources/pulumi-resource-random" "$work/random"
	cd "$work/random"
	go build -o "$work/pulumi-tfgen-random" ./cmd/pulumi-tfgen-random
	"$work/pulumi-tfgen-random" schema --out "$work/random-schema"
	cp "$work/random-schema/schema.json" cmd/pulumi-resource-random/schema.json
	cp "$work/random-schema/bridge-metadata.json" bridge/bridge-metadata.json
	go build -ldflags "-s -w -X slurm-platform.local/toolchain/pulumi-resource-random/bridge.Version=$RANDOM_PLUGIN_VERSION" \
		-o "$providers/pulumi-resource-random" ./cmd/pulumi-resource-random
	"$bin/pulumi" plugin rm resource random --all --yes
	"$bin/pulumi" plugin install resource random "$RANDOM_PLUGIN_VERSION" --reinstall \
		--file "$providers/pulumi-resource-random"
)

started=$SECONDS
step cli "5 min" pulumi-cli "$bin/pulumi"
step python_host "2 min" pulumi-language-python "$bin/pulumi-language-python" "$bin/pulumi-language-python-$HOST_VERSION" "$bin/pulumi-language-python-exec"
step kubernetes "7 min" "" "$home/plugins/resource-kubernetes-v$K8S_PLUGIN_VERSION"
step random "5 min" pulumi-resource-random "$home/plugins/resource-random-v$RANDOM_PLUGIN_VERSION"

cat >"$root/VERSIONS" <<VERSIONS
pulumi CLI $("$bin/pulumi" version): github.com/pulumi/pulumi/pkg/v3 $CLI_VERSION
pulumi-language-python-$HOST_VERSION: github.com/pulumi/pulumi/sdk/v3 $HOST_VERSION (python/cmd/pulumi-language-python), started by pulumi-language-python (scripts/toolchain/pulumi-language-python/wrapper)
plugin kubernetes $K8S_PLUGIN_VERSION: $K8S_MODULE@$K8S_MODULE_VERSION ($K8S_MODULE_SUM)
plugin random $RANDOM_PLUGIN_VERSION: github.com/terraform-providers/terraform-provider-random v3.6.3 (v1.3.2-0.20240911140632-e546ae44b440) via github.com/pulumi/pulumi-terraform-bridge/v3 v3.122.0
VERSIONS
cat >"$env_file" <<ENV
# Written by scripts/install-pulumi.sh: the project's Pulumi toolchain ($root/VERSIONS).
export PATH="$bin:\$PATH"
export PULUMI_HOME="$home"
export PULUMI_SKIP_UPDATE_CHECK=true
ENV
((SECONDS - started < 2)) || log "toolchain ready in $((SECONDS - started)) s: $root"
echo "$env_file"
