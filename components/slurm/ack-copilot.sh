#!/bin/bash
# The ACK copilot's steps: a Slurm client (munged + sinfo) that runs the configured resume/suspend programs for the
# nodes slurmctld powers up or down, with the files the guide's programs read. components/slurm/ack.py renders above
# them: SLURM_CONF_DIR, K8S_INFO_DIR, PODINFO_DIR, NAMESPACE, LABELS, RESUME_PROGRAM, SUSPEND_PROGRAM, POLL_SECONDS
# and start_munged.
set -euo pipefail
: "${SLURM_CONF_DIR:?}" "${K8S_INFO_DIR:?}" "${PODINFO_DIR:?}" "${NAMESPACE:?}" "${LABELS:?}"
: "${RESUME_PROGRAM:?}" "${SUSPEND_PROGRAM:?}" "${POLL_SECONDS:?}"
install -d /etc/slurm "$K8S_INFO_DIR" "$PODINFO_DIR"
cp -L "$SLURM_CONF_DIR"/* /etc/slurm/
printf %s "$KUBERNETES_SERVICE_HOST" > "$K8S_INFO_DIR/k8s_svc_host"
printf %s "$KUBERNETES_SERVICE_PORT" > "$K8S_INFO_DIR/k8s_svc_port"
printf %s "$NAMESPACE" > "$PODINFO_DIR/namespace"
printf '%s\n' "$LABELS" > "$PODINFO_DIR/labels"
start_munged
set +e  # from here on a failing sinfo or program is logged and retried, not fatal
# step STATE PROGRAM: run PROGRAM once for each node newly in STATE, and forget nodes that left it. The copilot's
# resume adds a replica on every call, so a node that stays POWERING_UP must not be resumed twice; when sinfo fails
# nothing is forgotten.
declare -A handled=()
step() {
  local state=$1 program=$2 listed node key
  local -A now=()
  listed=$(sinfo -h -N -t "$state" -o %N) || { echo "sinfo failed; retrying" >&2; return 0; }
  while IFS= read -r node; do
    [ -n "$node" ] || continue
    now[$node]=1
    [ -n "${handled[$state/$node]:-}" ] && continue
    echo "$state $node: $program"
    "$program" "$node" </dev/null && handled[$state/$node]=1
  done < <(sort -u <<<"$listed")
  for key in "${!handled[@]}"; do
    if [ "${key%%/*}" = "$state" ] && [ -z "${now[${key#*/}]:-}" ]; then unset "handled[$key]"; fi
  done
}
while true; do
  step POWERING_UP "$RESUME_PROGRAM"
  step POWERING_DOWN "$SUSPEND_PROGRAM"
  sleep "$POLL_SECONDS"
done
