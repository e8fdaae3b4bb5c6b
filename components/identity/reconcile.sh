#!/bin/bash
# The directory follows the config (slurm-platform, components/identity/reconciler.py).
#
# Reads the desired state ($DESIRED_STATE, rendered from the config) and makes the live directory hold it,
# bound as the directory's admin ($LDAP_ADMIN_DN, $LDAP_ADMIN_PASSWORD) at $LDAP_URI (with TLS, the CA in
# $LDAPTLS_CACERT). Idempotent: what already holds is not written, and a second run makes no write.
#
# The desired state: one record a line, fields separated by a TAB, every name, DN and value base64
# (so no value reaches LDIF or the shell as text):
#   users   <users OU dn>                       where researchers live (those not in the config are locked)
#   groups  <groups OU dn>                      where their groups live (locked researchers leave them all)
#   manage  <user|group|lock> <attribute>...    the attributes reconciled on each kind of entry
#   lock    <attribute>=<value>...              what a locked researcher holds of `manage lock`
#   group   <name> <dn> <attribute>=<value>...
#   user    <name> <dn> <attribute>=<value>...
#
# For each group and user: added when missing; otherwise each managed attribute whose values (as a set)
# differ is replaced (deleted when the config has none), and missing object classes are added. A live
# uidNumber or gidNumber is never changed (files on the shared filesystems carry it): a difference is a
# warning. A user under the users OU that the config no longer lists is locked, never deleted (it owns files):
# no keys, the locked shell, shadowExpire 1 (sssd refuses an expired account), and in no group.
set -euo pipefail

: "${LDAP_URI:?}" "${LDAP_ADMIN_DN:?}" "${LDAP_ADMIN_PASSWORD:?}" "${DESIRED_STATE:?}"
export LC_ALL=C
TAB=$'\t'
NL=$'\n'
changes=0

b64() { printf '%s' "$1" | base64 -w0; }
unb64() { printf '%s' "$1" | base64 -d; }

# The admin's password reaches the tools through a pipe, never their command line.
ldap() {
  local tool=$1
  shift
  "$tool" -x -H "$LDAP_URI" -D "$LDAP_ADMIN_DN" -y <(printf '%s' "$LDAP_ADMIN_PASSWORD") "$@"
}

# An entry's attributes as `name<TAB>base64 value` lines (names lower case), from ldapsearch's LDIF on stdin;
# `dn<TAB>base64 dn` starts each entry.
attribute_lines() {
  local line name rest
  while IFS= read -r line; do
    [[ -z $line ]] && continue
    name=${line%%:*}
    rest=${line#*:}
    if [[ $rest == :* ]]; then
      rest=${rest#:}
      printf '%s\t%s\n' "${name,,}" "${rest# }"
    else
      printf '%s\t%s\n' "${name,,}" "$(b64 "${rest# }")"
    fi
  done
}

# Sorted, unique, newline-separated: the form two sets are compared in.
as_set() {
  if [[ -n $1 ]]; then printf '%s\n' "$1" | sort -u | sed '/^$/d'; fi
}

# One write: an ldapadd or ldapmodify of the LDIF on stdin, announced and counted.
write() {
  local tool=$1 message=$2
  ldap "$tool" >/dev/null
  echo "$message"
  changes=$((changes + 1))
}

# reconcile KIND LABEL DN_B64 MANAGED DESIRED...
# DESIRED: `attribute=base64` items. Adds the entry when missing, else changes what differs of MANAGED.
reconcile() {
  local kind=$1 label=$2 dn_b64=$3 managed=$4
  shift 4
  local dn item name value
  dn=$(unb64 "$dn_b64")
  declare -A want=()
  for item in "$@"; do
    name=${item%%=*}
    value=${item#*=}
    want[${name,,}]+="${value}${NL}"
  done
  local found rc=0
  # shellcheck disable=SC2086 # MANAGED is a list of attribute names
  found=$(ldap ldapsearch -LLL -o ldif-wrap=no -s base -b "$dn" '(objectClass=*)' $managed 2>/dev/null) || rc=$?
  if ((rc == 32)); then
    if [[ $kind == lock ]]; then return 0; fi
    local ldif="dn:: ${dn_b64}${NL}"
    for item in "$@"; do
      ldif+="${item%%=*}:: ${item#*=}${NL}"
    done
    write ldapadd "added ${kind} ${label} (${dn})" <<<"$ldif"
    return 0
  elif ((rc != 0)); then
    echo "reading ${dn} failed (${rc}):" >&2
    ldap ldapsearch -LLL -s base -b "$dn" 1.1 >/dev/null || true
    return "$rc"
  fi
  declare -A have=()
  while IFS="$TAB" read -r name value; do
    [[ $name == dn ]] && continue
    have[$name]+="${value}${NL}"
  done < <(attribute_lines <<<"$found")
  local changes_ldif="" changed=() attribute key wanted held
  for attribute in $managed; do
    key=${attribute,,}
    wanted=$(as_set "${want[$key]:-}")
    held=$(as_set "${have[$key]:-}")
    if [[ $key == objectclass ]]; then
      # Added, never removed; compared without case.
      local lower_held="" missing=""
      for value in $held; do lower_held+="$(unb64 "$value" | tr '[:upper:]' '[:lower:]')${NL}"; done
      for value in $wanted; do
        if ! grep -qxF -- "$(unb64 "$value" | tr '[:upper:]' '[:lower:]')" <<<"$lower_held"; then missing+="objectClass:: ${value}${NL}"; fi
      done
      if [[ -n $missing ]]; then
        changes_ldif+="add: objectClass${NL}${missing}-${NL}"
        changed+=(objectClass)
      fi
      continue
    fi
    [[ $wanted == "$held" ]] && continue
    if [[ ($key == uidnumber || $key == gidnumber) && -n $held ]]; then
      local live_number desired_number
      live_number=$(for value in $held; do unb64 "$value"; echo; done | paste -sd, -)
      desired_number=$(for value in $wanted; do unb64 "$value"; echo; done | paste -sd, -)
      echo "warning: ${kind} ${label} keeps ${attribute} ${live_number} in the directory (the config says ${desired_number:-none}):" \
        "numbers are never changed (files carry them); pin ${attribute} ${live_number} in the config to make it the config's"
      continue
    fi
    if [[ -z $wanted ]]; then
      changes_ldif+="delete: ${attribute}${NL}-${NL}"
    else
      changes_ldif+="replace: ${attribute}${NL}"
      for value in $wanted; do changes_ldif+="${attribute}:: ${value}${NL}"; done
      changes_ldif+="-${NL}"
    fi
    changed+=("$attribute")
  done
  if ((${#changed[@]} > 0)); then
    local what=updated
    [[ $kind == lock ]] && what=locked
    write ldapmodify "${what} ${kind/lock/user} ${label} (${dn}): ${changed[*]}" <<<"dn:: ${dn_b64}${NL}changetype: modify${NL}${changes_ldif}"
  fi
}

users_ou="" groups_ou=""
declare -A manage=()
lock=()
groups=()
users=()
declare -A desired_users=()
while IFS= read -r record; do
  [[ -z $record ]] && continue
  IFS="$TAB" read -r -a fields <<<"$record"
  case ${fields[0]} in
    users) users_ou=${fields[1]} ;;
    groups) groups_ou=${fields[1]} ;;
    manage) manage[${fields[1]}]="${fields[*]:2}" ;;
    lock) lock=("${fields[@]:1}") ;;
    group) groups+=("$record") ;;
    user)
      users+=("$record")
      desired_users[${fields[1]}]=1
      ;;
    *)
      echo "unknown record ${fields[0]} in ${DESIRED_STATE}" >&2
      exit 2
      ;;
  esac
done <"$DESIRED_STATE"
[[ -n $users_ou && -n $groups_ou ]] || { echo "${DESIRED_STATE} names no users or groups OU" >&2; exit 2; }

# The directory answers (it may still be starting): a few tries, 5 s apart, before giving up (the Job retries too).
tries=${LDAP_CONNECT_TRIES:-6}
for ((try = 1; ; try++)); do
  if ldap ldapsearch -LLL -s base -b "$(unb64 "$users_ou")" 1.1 >/dev/null; then break; fi
  if ((try >= tries)); then exit 1; fi
  sleep 5
done

for record in "${groups[@]}"; do
  IFS="$TAB" read -r -a fields <<<"$record"
  reconcile group "$(unb64 "${fields[1]}")" "${fields[2]}" "${manage[group]}" "${fields[@]:3}"
done
for record in "${users[@]}"; do
  IFS="$TAB" read -r -a fields <<<"$record"
  reconcile user "$(unb64 "${fields[1]}")" "${fields[2]}" "${manage[user]}" "${fields[@]:3}"
done

# Researchers no longer in the config: locked where they are, and out of every group.
listing=$(ldap ldapsearch -LLL -o ldif-wrap=no -s one -b "$(unb64 "$users_ou")" '(objectClass=posixAccount)' uid)
declare -A locked=()
to_lock=()
live_dn=""
while IFS="$TAB" read -r name value; do
  if [[ $name == dn ]]; then
    live_dn=$value
  elif [[ $name == uid && -z ${desired_users[$value]:-} && -z ${locked[$value]:-} ]]; then
    locked[$value]=1
    to_lock+=("${value}${TAB}${live_dn}")
  fi
done < <(attribute_lines <<<"$listing")
for item in "${to_lock[@]}"; do
  reconcile lock "$(unb64 "${item%%"$TAB"*}")" "${item#*"$TAB"}" "${manage[lock]}" "${lock[@]}"
done

if ((${#locked[@]} > 0)); then
  listing=$(ldap ldapsearch -LLL -o ldif-wrap=no -s one -b "$(unb64 "$groups_ou")" '(objectClass=posixGroup)' memberUid)
  declare -A members=()
  group_dns=()
  while IFS="$TAB" read -r name value; do
    if [[ $name == dn ]]; then
      live_dn=$value
      group_dns+=("$value")
      members[$live_dn]=""
    elif [[ $name == memberuid ]]; then
      members[$live_dn]+="${value}${NL}"
    fi
  done < <(attribute_lines <<<"$listing")
  for live_dn in "${group_dns[@]}"; do
    leaving="" left=()
    for value in ${members[$live_dn]}; do
      if [[ -n ${locked[$value]:-} ]]; then
        leaving+="memberUid:: ${value}${NL}"
        left+=("$(unb64 "$value")")
      fi
    done
    if [[ -n $leaving ]]; then
      write ldapmodify "removed locked ${left[*]} from group $(unb64 "$live_dn")" \
        <<<"dn:: ${live_dn}${NL}changetype: modify${NL}delete: memberUid${NL}${leaving}-${NL}"
    fi
  done
fi

echo "reconciled: ${changes} changes"
