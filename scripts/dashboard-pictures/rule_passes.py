"""Split the recording rules into the passes promtool's backfill needs: it evaluates a rule against the
Prometheus it is given, so a rule that reads another rule's series must wait until that series is loaded.
Alerts are left out (a backfill records series, not alerts). Usage: rule_passes.py RULES PREFIX"""

import re
import sys

import yaml

with open(sys.argv[1]) as source:
    groups = yaml.safe_load(source)["groups"]
rules = [rule for group in groups for rule in group["rules"] if "record" in rule]
recorded = {rule["record"] for rule in rules}
passes: list[list[dict]] = []
done: set[str] = set()
while rules:
    ready = [r for r in rules if not {n for n in recorded - done if re.search(rf"(?<![\w:]){re.escape(n)}(?![\w:])", r["expr"])}]
    assert ready, f"rules that read each other: {[r['record'] for r in rules]}"
    passes.append(ready)
    done |= {r["record"] for r in ready}
    rules = [r for r in rules if r not in ready]
for number, batch in enumerate(passes, start=1):
    with open(f"{sys.argv[2]}-{number}.yml", "w") as out:
        yaml.safe_dump({"groups": [{"name": f"pass-{number}", "rules": batch}]}, out, sort_keys=False)
