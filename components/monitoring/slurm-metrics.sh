#!/bin/sh
# The Slurm exporter's collector (slurm-platform; components/monitoring/exporter.py renders its pod).
# It runs Slurm's clients as SlurmUser, whom PrivateData does not restrict, and writes what they say as
# Prometheus text to $METRICS_FILE every $INTERVAL_SECONDS (once, and exits, when $ONCE is set): written
# to a temporary file, then renamed, so the server beside it never reads half a file. The series are
# named in components/monitoring/series.py (the renderer fills in the SERIES_* variables).
# A command that fails leaves its series out of the file instead of repeating old values: only
# slurmctld_up, slurmdbd_up and the last success's timestamp (the last run where every command worked)
# stay. POSIX sh and awk only: every operator's Slurm image has them.
set -u

: "${METRICS_FILE:?where to write the metrics}"
: "${INTERVAL_SECONDS:=30}"
last_success=""

# The awk functions every program below starts with: esc() a label value; gpus() the GPUs of a TRES list such as
# `cpu=2,gres/gpu:h100=2,gres/gpu=2`: gres/gpu, else its typed entries summed (a TRES list without the untyped
# one), as components/monitoring/usage.py's tres_gpus counts them for the report.
AWK_FUNCTIONS='
function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return s }
function gpus(tres,    n, parts, i, typed) {
	n = split(tres, parts, ","); typed = 0
	for (i = 1; i <= n; i++) {
		if (parts[i] ~ /^gres\/gpu=[0-9]+$/) return substr(parts[i], 10) + 0
		if (parts[i] ~ /^gres\/gpu:[^=]+=[0-9]+$/) typed += substr(parts[i], index(parts[i], "=") + 1)
	}
	return typed
}
'

# Prometheus text for `ping up`-style answers: the series, then 1 or 0.
up() {
	printf '# TYPE %s gauge\n%s %s\n' "$1" "$1" "$2"
}

# Running and pending jobs as `job|account|partition|state|reason|tres` (tres: allocated while running,
# requested while pending). One line per array task (-r), so a pending array counts each task's GPUs; JobID is
# each array task's and het component's own id (not `123_4` or `123+0`), the SLURM_JOB_ID its prolog sees.
jobs() {
	squeue -h -a -r -t RUNNING,PENDING -O 'JobID:|,Account:|,Partition:|,State:|,Reason:|,tres-alloc:|'
}

jobs_metrics() {
	awk -F'|' \
		-v allocated="$SERIES_ACCOUNT_GPUS_ALLOCATED" -v pending="$SERIES_ACCOUNT_GPUS_PENDING" \
		-v jobs="$SERIES_ACCOUNT_JOBS" -v job_gpus="$SERIES_JOB_GPUS" "$AWK_FUNCTIONS"'
	NF >= 6 {
		account = esc($2); partition = esc($3); state = tolower($4); n = gpus($6)
		count[account "\",state=\"" state]++
		if (state == "running") {
			used[account "\",partition=\"" partition] += n
			if (n > 0) per_job[$1] = "job_id=\"" esc($1) "\",account=\"" account "\",partition=\"" partition "\"} " n
		} else if (n > 0) {
			wanted[account "\",partition=\"" partition "\",reason=\"" esc($5)] += n
		}
	}
	END {
		printf "# TYPE %s gauge\n", allocated; for (k in used) printf "%s{account=\"%s\"} %d\n", allocated, k, used[k]
		printf "# TYPE %s gauge\n", pending; for (k in wanted) printf "%s{account=\"%s\"} %d\n", pending, k, wanted[k]
		printf "# TYPE %s gauge\n", jobs; for (k in count) printf "%s{account=\"%s\"} %d\n", jobs, k, count[k]
		printf "# TYPE %s gauge\n", job_gpus; for (k in per_job) printf "%s{%s\n", job_gpus, per_job[k]
	}'
}

# Each node once (sinfo lists it per partition): `node|state|reason` (reason "none" when none; it may hold spaces).
nodes_metrics() {
	awk -F'|' -v series="$SERIES_NODE_STATE" "$AWK_FUNCTIONS"'
	BEGIN { printf "# TYPE %s gauge\n", series }
	NF >= 3 && !seen[$1]++ {
		reason = $3; for (i = 4; i <= NF; i++) reason = reason "|" $i
		if (reason == "none") reason = ""
		state = $2; sub(/[*~#!%$@^-]+$/, "", state)
		printf "%s{node=\"%s\",state=\"%s\",reason=\"%s\"} 1\n", series, esc($1), esc(state), esc(reason)
	}'
}

# `scontrol -o show node`: one line per node; its configured and allocated TRES give its GPUs.
gpus_metrics() {
	awk -v total="$SERIES_NODE_GPUS" -v allocated="$SERIES_NODE_GPUS_ALLOCATED" "$AWK_FUNCTIONS"'
	{
		node = ""; cfg = 0; alloc = 0
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^NodeName=/) node = substr($i, 10)
			else if ($i ~ /^CfgTRES=/) cfg = gpus(substr($i, 9))
			else if ($i ~ /^AllocTRES=/) alloc = gpus(substr($i, 11))
		}
		if (node != "") { line_total[node] = cfg; line_alloc[node] = alloc }
	}
	END {
		printf "# TYPE %s gauge\n", total; for (n in line_total) printf "%s{node=\"%s\"} %d\n", total, esc(n), line_total[n]
		printf "# TYPE %s gauge\n", allocated; for (n in line_alloc) printf "%s{node=\"%s\"} %d\n", allocated, esc(n), line_alloc[n]
	}'
}

# One run: every series to stdout; returns non-zero when any command failed.
collect() {
	failed=0
	if scontrol ping 2>/dev/null | grep -q 'is UP'; then up "$SERIES_SLURMCTLD_UP" 1; else up "$SERIES_SLURMCTLD_UP" 0; failed=1; fi
	if sacctmgr -nP show cluster format=Cluster >/dev/null 2>&1; then up "$SERIES_SLURMDBD_UP" 1; else up "$SERIES_SLURMDBD_UP" 0; failed=1; fi
	# Each command's output is taken whole before its series are written: a failure midway writes none of them.
	if out=$(jobs); then printf '%s\n' "$out" | jobs_metrics; else failed=1; fi
	if out=$(sinfo -h -N -o '%N|%T|%E'); then printf '%s\n' "$out" | nodes_metrics; else failed=1; fi
	if out=$(scontrol -o show node); then printf '%s\n' "$out" | gpus_metrics; else failed=1; fi
	return $failed
}

while :; do
	if collect >"$METRICS_FILE.tmp"; then last_success=$(date +%s); fi
	if [ -n "$last_success" ]; then
		up "$SERIES_COLLECTED_AT" "$last_success" >>"$METRICS_FILE.tmp"
	fi
	mv -f "$METRICS_FILE.tmp" "$METRICS_FILE"
	[ -n "${ONCE:-}" ] && exit 0
	sleep "$INTERVAL_SECONDS"
done
