#!/usr/bin/env bash
# Builds the Pulumi toolchain this project needs from Go modules (no vendor
# binary downloads), installs it into a cache outside the checkout and prints
# the directory to put on PATH as the last line of stdout; logs go to stderr.
#
#   PATH="$(scripts/install-pulumi.sh):$PATH"
#
# What is built, and why it is not exactly the versions of the Python SDKs in
# requirements.txt (pulumi 3.272.0, pulumi-kubernetes 4.34.2, pulumi-random
# 4.21.4): the Go module proxy our machines reach serves only part of the
# Pulumi modules (everything else answers "403 Forbidden: This module version
# is not available").
#   bin/pulumi          CLI from github.com/pulumi/pulumi/pkg/v3 at $PULUMI_PKG_VERSION,
#                       the newest pkg/v3 the proxy serves, via the wrapper module
#                       scripts/toolchain/pulumi-cli.
#   plugin kubernetes   pulumi-kubernetes provider/v4 at the only version the proxy
#                       serves (commit f47bc2d6f199, 2026-01-15, between v4.24.0 and
#                       v4.25.0), schema generated as its generate.go does; it
#                       reports that version, so the engine warns it expected 4.34.2.
# Not buildable here, so not built (the toolchain is incomplete until they are
# on PATH / in the plugin cache; the script then exits 2 saying so):
#   pulumi-language-python   github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3: no version served
#   plugin random            github.com/pulumi/pulumi-random/provider/v4: no version served
# A machine with a normally installed Pulumi (get.pulumi.com, brew, ...) has
# both; `make up` and the engine tests use such an installation when present.
#
# Environment: SLURM_PLATFORM_TOOLCHAIN (cache root, default
# ~/.cache/slurm-platform/toolchain), PULUMI_HOME (plugin cache), and the usual
# Go variables (GOMODCACHE, GOCACHE, GOPROXY).
set -euo pipefail

PULUMI_SDK_VERSION=3.272.0          # pulumi==3.272.0 (requirements.txt)
PULUMI_PKG_VERSION=v3.259.0         # keep in step with toolchain/*/go.mod
K8S_SDK_VERSION=4.34.2              # pulumi-kubernetes==4.34.2: the plugin version the SDK asks for
K8S_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
K8S_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
# The checksum database has no record of this pseudo-version: pin its hash here.
K8S_MODULE_SUM=h1:j2bphCf7c2YhnBrhwht2f3TNRRgcMImltUlAgzxr9H4=
K8S_PROVIDER_VERSION=4.24.1-0.20260115033456-f47bc2d6f199
RANDOM_SDK_VERSION=4.21.4           # pulumi-random==4.21.4

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
toolchain_src=$here/toolchain
root=${SLURM_PLATFORM_TOOLCHAIN:-$HOME/.cache/slurm-platform/toolchain}/pulumi-$PULUMI_SDK_VERSION
bin=$root/bin
providers=$root/providers
stamp=$root/.stamp
plugin_dir=${PULUMI_HOME:-$HOME/.pulumi}/plugins

log() { echo "install-pulumi: $*" >&2; }

# Everything the build depends on: this script and the wrapper modules.
fingerprint() {
	{
		cat "${BASH_SOURCE[0]}"
		find "$toolchain_src" -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
			LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -d' ' -f1
}

# What the plugin cache must hold: "name version path size mtime" per plugin.
plugins_state() {
	local name version file
	file=$plugin_dir/resource-kubernetes-v$K8S_SDK_VERSION/pulumi-resource-kubernetes
	echo "kubernetes $K8S_SDK_VERSION $file $(stat -c '%s %Y' "$file" 2>/dev/null || echo missing)"
}

installed() {
	[[ -f $stamp && -x $bin/pulumi ]] || return 1
	[[ "$(head -n1 "$stamp")" == "$(fingerprint)" ]] || return 1
	[[ "$(tail -n +2 "$stamp")" == "$(plugins_state)" ]]
}

# The pieces the proxy does not serve must come from elsewhere (a normal
# Pulumi installation): say exactly what is missing.
complete_or_explain() {
	local missing=()
	PATH="$bin:$PATH" command -v pulumi-language-python >/dev/null ||
		missing+=("pulumi-language-python (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3: 403 from the Go module proxy)")
	[[ -x $plugin_dir/resource-random-v$RANDOM_SDK_VERSION/pulumi-resource-random ]] ||
		missing+=("plugin random v$RANDOM_SDK_VERSION (github.com/pulumi/pulumi-random/provider/v4: 403 from the Go module proxy)")
	if ((${#missing[@]})); then
		log "toolchain incomplete; built what the registries serve into $bin, missing:"
		printf 'install-pulumi:   %s\n' "${missing[@]}" >&2
		log "install Pulumi the normal way (https://www.pulumi.com/docs/install/) on a machine that can reach it"
		exit 2
	fi
	echo "$bin"
	exit 0
}

if installed; then
	complete_or_explain
fi

mkdir -p "$root"
# One build at a time (e.g. under make -j); re-check once we hold the lock.
if command -v flock >/dev/null; then
	exec 9>"$root/.lock"
	flock 9
	if installed; then
		complete_or_explain
	fi
fi

command -v go >/dev/null || { log "go is required to build the Pulumi toolchain"; exit 1; }

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
export PULUMI_SKIP_UPDATE_CHECK=true
TIMEFORMAT="install-pulumi: %0R s"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$bin" "$providers"

# A pulumi CLI of exactly the SDK's version already on PATH (outside our bin
# dir) is the real thing: reuse it.
external_cli=""
while IFS= read -r candidate; do
	[[ $candidate == "$bin/pulumi" ]] && continue
	if [[ "$("$candidate" version 2>/dev/null)" == "v$PULUMI_SDK_VERSION" ]]; then
		external_cli=$candidate
		break
	fi
done < <(type -ap pulumi 2>/dev/null || true)

rm -f "$stamp"
if [[ -n $external_cli ]]; then
	log "reusing $external_cli (v$PULUMI_SDK_VERSION)"
	ln -sfn "$external_cli" "$bin/pulumi"
else
	log "building pulumi CLI (github.com/pulumi/pulumi/pkg/v3 $PULUMI_PKG_VERSION)"
	time go -C "$toolchain_src/pulumi-cli" build \
		-ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_PKG_VERSION" \
		-o "$work/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
	rm -f "$bin/pulumi"
	mv "$work/pulumi" "$bin/pulumi"

fi

log "building pulumi-resource-kubernetes ($K8S_MODULE@$K8S_MODULE_VERSION)"
k8s_download() {
	(cd "$work" && GONOSUMDB=github.com/pulumi/pulumi-kubernetes go mod download -json "$K8S_MODULE@$K8S_MODULE_VERSION")
}
k8s_json=$(k8s_download)
k8s_sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$k8s_json")
k8s_dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$k8s_json")
if [[ $k8s_sum != "$K8S_MODULE_SUM" ]]; then
	log "checksum mismatch for $K8S_MODULE@$K8S_MODULE_VERSION: got '$k8s_sum', want $K8S_MODULE_SUM"
	exit 1
fi
# Its go.mod replaces the sdk module with ../sdk and cmd/pulumi-resource-kubernetes
# embeds a schema generated at build time: build from a writable copy.
cp -r "$k8s_dir" "$work/k8s"
chmod -R u+w "$work/k8s"
time (
	set -e
	cd "$work/k8s"
	go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4
	# go:generate step of cmd/pulumi-resource-kubernetes (as its Makefile does).
	(cd cmd/pulumi-resource-kubernetes && VERSION=$K8S_PROVIDER_VERSION GOFLAGS="$GOFLAGS -mod=mod" go run generate.go)
	GOFLAGS="$GOFLAGS -mod=mod" go build \
		-ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PROVIDER_VERSION" \
		-o "$providers/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes
)

log "installing provider plugins into $plugin_dir"
"$bin/pulumi" plugin install resource kubernetes "v$K8S_SDK_VERSION" --reinstall \
	--file "$providers/pulumi-resource-kubernetes" >&2

if [[ -n $external_cli ]]; then
	cli_line="$external_cli (v$PULUMI_SDK_VERSION)"
else
	cli_line="$("$bin/pulumi" version), built from github.com/pulumi/pulumi/pkg/v3 $PULUMI_PKG_VERSION"
fi
cat >"$root/VERSIONS" <<VERSIONS
pulumi CLI: $cli_line
plugin kubernetes v$K8S_SDK_VERSION: $K8S_MODULE@$K8S_MODULE_VERSION, reports $K8S_PROVIDER_VERSION
VERSIONS
{
	fingerprint
	plugins_state
} >"$stamp.tmp"
mv "$stamp.tmp" "$stamp"
log "installed into $root"
complete_or_explain
