#!/bin/bash
# The tenants Job's steps: the tenants' Slurm accounts, QOS and associations (sacctmgr), then the reservations of
# their cells (scontrol). components/tenancy/accounts.py renders what they act on above this file: CLUSTER,
# SLURMDBD_HOST, NOT_REACHABLE_YET, RESERVATION_PREFIX, OTHER_STACKS_RESERVATIONS, RESERVATION_TRIES,
# RESERVATION_RETRY_SECONDS, oppo and WANTED_RESERVATIONS; auth_setup; and the functions add_accounts,
# check_accounts, shrink_reservations, create_reservations and check_reservations.
# shellcheck disable=SC2034,SC2329 # state and helpers the rendered functions use (the whole script is checked too)
set -euo pipefail
: "${CLUSTER:?}" "${SLURMDBD_HOST:?}" "${NOT_REACHABLE_YET:?}" "${RESERVATION_PREFIX:?}" "${OTHER_STACKS_RESERVATIONS:?}"
: "${RESERVATION_TRIES:?}" "${RESERVATION_RETRY_SECONDS:?}" "${oppo?}"

read_state() {
  clusters=$(sacctmgr -nP show cluster format=Cluster)
  qos=$(sacctmgr -nP show qos format=Name,Priority,Preempt,PreemptMode)
  assoc=$(sacctmgr -nP show assoc where cluster="$CLUSTER" format=Account,ParentName,User,GrpTRES,QOS,DefaultQOS)
}
# has VAR LINE: that exact line; starts VAR PREFIX: a line starting so.
has() { [[ $'\n'${!1}$'\n' == *$'\n'"$2"$'\n'* ]]; }
starts() { [[ $'\n'${!1} == *$'\n'"$2"* ]]; }
# modify_account ACCOUNT PARENT LISTED SETTING...: moved where its parent differs, then set where its settings
# (LISTED: GrpTRES|QOS|DefaultQOS as its line ACCOUNT|PARENT||... lists them) differ: a modify that changes nothing fails.
modify_account() {
  local account=$1 parent=$2 listed=$3 line; shift 3
  starts assoc "$account|$parent|" || sacctmgr -i modify account where name="$account" cluster="$CLUSTER" set Parent="$parent"
  while IFS= read -r line; do
    if [[ $line == "$account|"?*"||"* && $line != "$account||"* ]]; then
      [[ ${line#"$account|"*"||"} == "$listed" ]] || sacctmgr -i modify account where name="$account" cluster="$CLUSTER" set "$@"
      return
    fi
  done <<<"$assoc"
}

# The reservations of the tenants' cells (slurmctld; retried while it or the pool's nodes are not there yet).
retry() {
  local tries=0 out
  until out=$("$@" 2>&1); do
    (( ++tries < RESERVATION_TRIES )) || { echo "gave up: $* : $out" >&2; return 1; }
    echo "retrying in $RESERVATION_RETRY_SECONDS s: $* : $out"; sleep "$RESERVATION_RETRY_SECONDS"
  done
}
# Every reservation slurmctld holds, its line by its name: read again after each phase of changes.
declare -A held
read_reservations() {
  local all line name
  all=$(scontrol -o show reservation)
  held=()
  while IFS= read -r line; do
    name=${line#ReservationName=}; [[ $name == "$line" ]] || held[${name%% *}]=$line
  done <<<"$all"
}
# is NAME KEY VALUE: slurmctld holds reservation NAME with KEY=VALUE; larger NAME N: with more than N nodes.
is() { [[ "${held[$1]-} " == *" $2=$3 "* ]]; }
larger() { [[ ${held[$1]-} =~ \ NodeCnt=([0-9]+) ]] && (( BASH_REMATCH[1] > $2 )); }
gone() { scontrol delete ReservationName="$1" || { read_reservations && [[ -z ${held[$1]-} ]]; }; }
wanted() { local name; for name in "${WANTED_RESERVATIONS[@]}"; do [[ $name == "$1" ]] && return; done; return 1; }

auth_setup
# Wait only while slurmdbd is unreachable; fail at once on anything else (auth, config, ...).
until out=$(sacctmgr -nP show cluster format=Cluster 2>&1); do
  grep -qE "$NOT_REACHABLE_YET" <<<"$out" || { echo "$out" >&2; exit 1; }
  echo "waiting for slurmdbd at $SLURMDBD_HOST"; sleep 5
done
read_state
has clusters "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER"
add_accounts
# What slurmdbd holds now.
read_state
missing=0
check_accounts

retry scontrol -o show reservation
read_reservations
# Ours no longer wanted go first, so their nodes are free before new ones ask for them.
for name in "${!held[@]}"; do
  [[ $name == "$RESERVATION_PREFIX"* ]] || continue
  # A tenant stack's (cells.<stack>.<pool>.<tenant>), where this is the platform stack of several.
  [[ $OTHER_STACKS_RESERVATIONS == keep && $name == *.*.*.* ]] && continue
  wanted "$name" && continue
  if ! scontrol delete ReservationName="$name" 2>/dev/null; then
    # Jobs still run in it: no new ones go there, and Slurm deletes it a minute after the last (should this Job give up first).
    scontrol update ReservationName="$name" Flags-=MAGNETIC Flags+=PURGE_COMP=00:01:00
    retry gone "$name"
  fi
done
shrink_reservations
read_reservations
create_reservations
read_reservations
check_reservations
exit "$missing"
