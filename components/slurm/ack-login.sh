#!/bin/bash
# The ACK login's steps (as the operator's init script does for its pods): slurm.conf into /etc/slurm, munged on the
# platform's key, sssd for users and groups (NSS) and for keys and the account check (PAM) where the directory is on,
# a researcher's home made at the first login, then sshd in the foreground. components/slurm/ack.py renders above
# them: NEEDED (the programs the image must have), SLURM_CONF_DIR, LOGIN_DIR, LDAP (yes or no), MKHOMEDIR_SESSION
# and start_munged.
set -euo pipefail
: "${NEEDED[0]:?}" "${SLURM_CONF_DIR:?}" "${LOGIN_DIR:?}" "${LDAP:?}" "${MKHOMEDIR_SESSION:?}"
export PATH="$PATH:/usr/sbin:/sbin"
for program in "${NEEDED[@]}"; do
  command -v "$program" >/dev/null || { echo "slurm.ack.image has no $program: the login needs it" >&2; exit 1; }
done
install -d /etc/slurm
cp -L "$SLURM_CONF_DIR"/* /etc/slurm/
start_munged
install -d -m 0700 /root/.ssh
install -m 0600 "$LOGIN_DIR/authorized_keys" /root/.ssh/authorized_keys
install -m 0644 "$LOGIN_DIR/sshd_config" /etc/ssh/sshd_config
# Host keys are made at start: they change when a login pod is replaced.
ssh-keygen -A
install -d -m 0755 /run/sshd
if [[ $LDAP == yes ]]; then
  sed -i -E 's/^(passwd|group|shadow):.*/\1: files sss/' /etc/nsswitch.conf
  grep -qs pam_mkhomedir /etc/pam.d/sshd || echo "$MKHOMEDIR_SESSION" >> /etc/pam.d/sshd
  sssd -D
fi
exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
