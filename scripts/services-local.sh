#!/usr/bin/env bash
# The Debian packages the services test tier (tests/test_services_*.py) runs:
# real Slurm (slurmctld, slurmd, slurmdbd, sacctmgr), munge, MariaDB, OpenLDAP
# (slapd, ldap-utils), nslcd and sssd, and openssl (the LDAP tests' TLS certificates).
# Root on a Debian-family machine only.
#
#   scripts/services-local.sh install   install what is missing (no service started)
#   scripts/services-local.sh check     exit 1 with the exact install command when something is missing
#   scripts/services-local.sh command   print that command
#
# The tier starts the daemons itself (tests/services.py), on loopback and in a
# private mount namespace, and stops each by its PID. Installing starts none of
# them: policy-rc.d refuses every start, debconf is told not to configure slapd
# or nsswitch, and the host files a maintainer script edits (the name service
# switch, PAM's common stacks) are put back as they were. The packages' own
# system accounts (munge, slurm, mysql, openldap, nslcd, sssd) stay: dpkg owns them.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server slapd ldap-utils nslcd libnss-ldapd sssd-ldap sssd-tools libnss-sss openssl)
# Edited by libnss-ldapd's, libnss-sss's and libpam-sss's maintainer scripts.
RESTORED=(/etc/nsswitch.conf /etc/pam.d/common-auth /etc/pam.d/common-account /etc/pam.d/common-password /etc/pam.d/common-session /etc/pam.d/common-session-noninteractive)

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
	for name in slurmctld slurmd slurmdbd munged mariadbd slapd nslcd sssd; do
		for pid in $(pgrep -x "$name" || true); do
			log "stopping $name ($pid), started by its package"
			kill "$pid"
		done
	done
	check
}

case "${1:-}" in
install) install_packages ;;
check) check ;;
command) install_command ;;
*)
	echo "usage: $0 install|check|command" >&2
	exit 2
	;;
esac
