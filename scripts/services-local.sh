#!/usr/bin/env bash
# The Debian packages the services test tier (tests/test_services_*.py) runs:
# real Slurm (slurmctld, slurmd, slurmdbd, sacctmgr), munge, MariaDB, OpenLDAP
# (slapd, ldap-utils), nslcd and sssd, openssl (the LDAP tests' TLS certificates) and
# openssh-server (the login tests' sshd, on the keys sssd reads from the directory), and
# shellcheck (the directory reconciler's script).
# Root on a Debian-family machine only.
#
#   scripts/services-local.sh install   install what is missing (no service started)
#   scripts/services-local.sh check     exit 1 with the exact install command when something is missing
#   scripts/services-local.sh command   print that command
#   scripts/services-local.sh rootfs SUITE          the Slurm generation of Debian SUITE (bookworm, trixie,
#                                                   forky): print its root filesystem's path, built if missing
#   scripts/services-local.sh rootfs-command SUITE  print the command that builds it
#
# Each Slurm generation runs from a root filesystem of its own (Slurm, munge and their
# libraries from Debian's archive, made by mmdebstrap), cached outside the checkout in
# ${XDG_CACHE_HOME:-~/.cache}/slurm-platform/rootfs/<suite>-<hash of the package list>:
# a new package list is a new directory, and one that exists is never built again.
#
# The tier starts the daemons itself (tests/services.py), on loopback and in a
# private mount namespace, and stops each by its PID. Installing starts none of
# them: policy-rc.d refuses every start, debconf is told not to configure slapd
# or nsswitch, and the host files a maintainer script edits (the name service
# switch, PAM's common stacks) are put back as they were. The packages' own
# system accounts (munge, slurm, mysql, openldap, nslcd, sssd, sshd) stay: dpkg owns them.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server slapd ldap-utils nslcd libnss-ldapd sssd-ldap sssd-tools libnss-sss openssl openssh-server shellcheck)
# Edited by libnss-ldapd's, libnss-sss's and libpam-sss's maintainer scripts.
RESTORED=(/etc/nsswitch.conf /etc/pam.d/common-auth /etc/pam.d/common-account /etc/pam.d/common-password /etc/pam.d/common-session /etc/pam.d/common-session-noninteractive)

# What each generation's root filesystem holds: the daemons and clients, munge, and what the jobs and
# the tenants Job's script run there (python3 opens the fake GPUs, hostname answers `srun hostname`).
ROOTFS_PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge python3-minimal hostname)
ROOTFS_SUITES=(bookworm trixie forky)
# From 24.11 (trixie) on, also sackd: auth/slurm's clients (Slinky's) get their credentials from it.
rootfs_packages() {
	if [[ $1 == bookworm ]]; then
		echo "${ROOTFS_PACKAGES[*]}"
	else
		echo "${ROOTFS_PACKAGES[*]} sackd"
	fi
}
ROOTFS_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/slurm-platform/rootfs
# The archive this machine's apt already uses.
MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
	sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/* *$/\1/p; s/^deb \(http[^ ]*\/debian\)\/* .*/\1/p' | head -n1 || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}

log() { echo "services-local: $*" >&2; }

install_command() {
	echo "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${PACKAGES[*]}"
}

missing() {
	local package
	for package in "${PACKAGES[@]}"; do
		[[ "$(dpkg-query -W -f '${db:Status-Status}' "$package" 2>/dev/null)" == installed ]] || echo "$package"
	done
}

check() {
	local absent
	absent=$(missing | tr '\n' ' ')
	[[ -z $absent ]] && return
	log "not installed: $absent"
	log "run as root on Debian 12 (or: sudo scripts/services-local.sh install):"
	log "  $(install_command)"
	exit 1
}

install_packages() {
	[[ -z "$(missing)" ]] && return
	command -v apt-get >/dev/null || {
		log "apt-get not found: the services tier needs a Debian-family machine"
		check
	}
	[[ $(id -u) == 0 ]] || {
		log "installing needs root"
		check
	}
	local saved policy=/usr/sbin/policy-rc.d own_policy="" file
	saved=$(mktemp -d)
	for file in "${RESTORED[@]}"; do
		[[ -e $file ]] && install -D -p "$file" "$saved$file"
	done
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# services-local.sh: no service starts while it installs.\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		own_policy=1
	fi
	debconf-set-selections <<-'EOF'
		slapd slapd/no_configuration boolean true
		libnss-ldapd libnss-ldapd/nsswitch multiselect
		libnss-ldapd libnss-ldapd/clean_nsswitch boolean false
		nslcd nslcd/ldap-uris string ldap://127.0.0.1/
		nslcd nslcd/ldap-base string dc=example,dc=org
	EOF
	local status=0
	log "installing: ${PACKAGES[*]}"
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}") >&2 || status=$?
	for file in "${RESTORED[@]}"; do
		if [[ -e $saved$file ]]; then
			cp -p "$saved$file" "$file"
		else
			rm -f "$file"
		fi
	done
	rm -rf "$saved"
	[[ -n $own_policy ]] && rm -f "$policy"
	[[ $status == 0 ]] || {
		log "apt-get failed ($status)"
		check
	}
	# Packages whose init scripts ignore policy-rc.d would show here; the tier starts its own.
	local name pid
	for name in slurmctld slurmd slurmdbd munged mariadbd slapd nslcd sssd sshd; do
		for pid in $(pgrep -x "$name" || true); do
			log "stopping $name ($pid), started by its package"
			kill "$pid"
		done
	done
	check
}

rootfs_path() {
	local hash
	# shellcheck disable=SC2046 # one package per line
	hash=$(printf '%s\n' "$1" $(rootfs_packages "$1") | sha256sum | cut -c1-12)
	echo "$ROOTFS_CACHE/$1-$hash"
}

rootfs_command() {
	echo "sudo $0 rootfs $1"
}

# The suite's root filesystem, built once (mmdebstrap, installed first when missing) into a temporary
# directory beside it and renamed into place, so a build that fails or is interrupted leaves no cache entry.
rootfs() {
	local suite=$1 target
	[[ " ${ROOTFS_SUITES[*]} " == *" $suite "* ]] || {
		log "unknown suite '$suite': one of ${ROOTFS_SUITES[*]}"
		exit 2
	}
	target=$(rootfs_path "$suite")
	if [[ ! -d $target ]]; then
		[[ $(id -u) == 0 ]] || {
			log "building the $suite root filesystem needs root: $(rootfs_command "$suite")"
			exit 1
		}
		if ! command -v mmdebstrap >/dev/null; then
			log "installing mmdebstrap"
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap) >&2
		fi
		mkdir -p "$ROOTFS_CACHE"
		local building
		building=$(mktemp -d "$target.building.XXXXXX")
		trap 'rm -rf "$building"' EXIT
		local packages
		packages=$(rootfs_packages "$suite")
		log "building $target from $MIRROR ($suite: $packages)"
		# The testing suite's Release may carry an expired Valid-Until; the packages are still signed.
		mmdebstrap --quiet --variant=essential --include="${packages// /,}" \
			--aptopt='Acquire::Check-Valid-Until "false"' \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
			"$suite" "$building" "$MIRROR" >&2
		mv "$building" "$target"
		trap - EXIT
	fi
	echo "$target"
}

case "${1:-}" in
install) install_packages ;;
check) check ;;
command) install_command ;;
rootfs) rootfs "${2:?suite}" ;;
rootfs-command) rootfs_command "${2:?suite}" ;;
*)
	echo "usage: $0 install|check|command|rootfs SUITE|rootfs-command SUITE" >&2
	exit 2
	;;
esac
