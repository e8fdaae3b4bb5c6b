#!/usr/bin/env bash
# The pictures of docs/monitoring.md's Dashboards section, from a real run: six hours of synthetic series of
# prod-hoalac's Slurm exporter, DCGM, Kueue and kube-state-metrics (synthetic.py: its story is in its docstring),
# backfilled into a real Prometheus (promtool tsdb create-blocks-from openmetrics); the recording rules evaluated
# by that Prometheus over the same six hours (create-blocks-from rules: first the rules that read only scraped
# series, then those that read recorded ones); then every dashboard drawn from its answers (draw.py).
#
#   scripts/dashboard-pictures/draw.sh BIN RULES [OUT]
#     BIN    a directory with prometheus and promtool (scripts/prometheus-local.sh build prints one)
#     RULES  the rule groups of prod-hoalac with monitoring on, as promtool reads them (rules.rule_groups)
#     OUT    where the PNGs go (default docs/monitoring)
#
# --query.lookback-delta=59s stands in for the staleness markers a scrape writes when a series ends (a
# backfill writes none): without it a node that changes state counts in both states for five minutes.
set -euo pipefail
BIN=$1 RULES=$2 OUT=${3:-docs/monitoring}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
PORT=19091
PID=
stop() { if [[ -n $PID ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=; fi; }
trap 'stop; rm -rf "$WORK"' EXIT
start() {
  printf 'global:\n  evaluation_interval: 1m\n' > "$WORK/prometheus.yml"
  "$BIN/prometheus" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/data" --storage.tsdb.retention.time=1y \
    --query.lookback-delta=59s --web.listen-address=127.0.0.1:$PORT > "$WORK/prometheus.log" 2>&1 &
  PID=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/-/ready" > /dev/null && return; sleep 0.2; done
  cat "$WORK/prometheus.log" >&2; exit 1
}
END=$(( $(date +%s) / 60 * 60 )); START=$((END - 6 * 3600))
python3 "$HERE/synthetic.py" "$END" > "$WORK/synthetic.om"
"$BIN/promtool" tsdb create-blocks-from openmetrics "$WORK/synthetic.om" "$WORK/data" > /dev/null
.venv/bin/python "$HERE/rule_passes.py" "$RULES" "$WORK/pass"
for pass in "$WORK"/pass-*.yml; do
  start
  "$BIN/promtool" tsdb create-blocks-from rules --start=$START --end=$END --eval-interval=60s \
    --url=http://127.0.0.1:$PORT --output-dir="$WORK/rules" "$pass" 2> "$WORK/rules.log"
  mv "$WORK/rules"/* "$WORK/data/"
  stop
done
start
mkdir -p "$OUT"
PYTHONPATH=.:policies .venv/bin/python "$HERE/draw.py" "http://127.0.0.1:$PORT" "$END" "$OUT" prod-hoalac
