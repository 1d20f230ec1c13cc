"""Writes config/prometheus/tests/capability.test.yml (kept as generated; see its header)."""
MIN = 60
OFFSET = {"json": 1, "named_tool": 5, "required_tool": 9}

def checks(cap):
    return [m for m in range(MIN + 1) if m >= OFFSET[cap] and (m - OFFSET[cap]) % 11 == 0]

def counter(times):
    return " ".join(str(sum(1 for x in times if x <= t)) for t in range(MIN + 1))

lines = []
def series(target, pod, cap, fails):
    """fails: indexes (0-based) of this capability's checks that fail."""
    at = checks(cap)
    base = f'target="{target}",model="m",backend="openai-chat",pod="{pod}",group="v1",capability="{cap}"'
    lines.append(f"      - series: 'inferprobe_canary_structured_checks_total{{{base}}}'\n        values: '{counter(at)}'")
    bad = [at[i] for i in fails if i < len(at)]
    reason = "schema" if cap == "json" else "no_tool_call"
    lines.append(f"      - series: 'inferprobe_canary_invalid_outputs_total{{{base},reason=\"{reason}\"}}'\n        values: '{counter(bad)}'")

ALL = range(10)
# onecap: r2's JSON answers all break; its tools, and r0's and r1's everything, pass.
for pod in ["r0", "r1", "r2"]:
    for cap in OFFSET:
        series("onecap", pod, cap, ALL if (pod, cap) == ("r2", "json") else [])
# wholepool: JSON breaks on both replicas (a pool-wide response_format backend failure).
for pod in ["r0", "r1"]:
    for cap in OFFSET:
        series("wholepool", pod, cap, ALL if cap == "json" else [])
# fumbles: every replica fails about a fifth of each capability's checks, and r0 two JSON
# checks in a row once (a 4% run of bad luck at 20%).
fumble = {"r0": [0, 1, 5], "r1": [2, 4], "r2": [1, 3, 5]}
for pod, fails in fumble.items():
    for cap in OFFSET:
        series("fumbles", pod, cap, fails if cap == "json" else [(i + 2) % 5 for i in [0]])

header = """# promtool test rules config/prometheus/tests/capability.test.yml
# InferprobeCapabilityBroken at the default interval: the built-in set (11 prompts, one a
# minute) checks each structured capability every 11 minutes, about three times in 30.
# "onecap": one replica's JSON answers all break, its tool calls pass: a third of its
# structured checks, which InferprobeInvalidOutputs (half of them) never saw; it pages for
# that replica and capability alone. "wholepool": every replica's JSON breaks: each pages.
# "fumbles": every replica fumbles about a fifth, one of them two in a row: quiet.
# Written by a generator (the series are counters stepping every 11 minutes); regenerate
# rather than edit by hand: python3 scripts/gen-capability-test.py
rule_files:
  - ../recording-rules.yml
  - ../alerting-rules.yml
evaluation_interval: 1m

tests:
  - interval: 1m
    input_series:
"""
def annotations(target, pod):
    """What the alert says of a replica whose three JSON checks in the window all failed."""
    description = (
        f"Every canary check of {target} (pod {pod}) asking for json (json: a `response_format` answer; "
        "named_tool: the function `tool_choice` names; required_tool: `tool_choice: required`; auto_tool: "
        "tools offered) failed over 30 minutes (3 of them), while its peers pass it, or every replica fails "
        "it alike. Agents relying on it get nothing usable. inferprobe_canary_invalid_outputs_total{capability, "
        "reason} says how; the WARN lines and the status page quote the answers. Check the server's "
        "structured-output backend (`response_format`), tool-call parser and chat template (tools)."
    )
    return f"""            exp_annotations:
              runbook_url: 'https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md#inferprobecapabilitybroken'
              summary: 'Replica {pod} of {target} fails every json check: 3 in 30 minutes.'
              description: '{description.replace("'", "''")}'
"""


PAGED = [("onecap", "r2"), ("wholepool", "r0"), ("wholepool", "r1")]


def firing(eval_time):
    """The replicas whose JSON capability pages at `eval_time`: r2 of onecap, all of wholepool."""
    alerts = "".join(f"""          - exp_labels:
              severity: critical
              target: {t}
              pod: {p}
              group: v1
              capability: json
""" + annotations(t, p) for t, p in PAGED)
    return f"""      - eval_time: {eval_time}
        alertname: InferprobeCapabilityBroken
        exp_alerts:
""" + alerts


tail = """    alert_rule_test:
      # The second JSON check fails at minute 12; 12 minutes of `for`: not yet at 20.
      - eval_time: 20m
        alertname: InferprobeCapabilityBroken
        exp_alerts: []
      - eval_time: 40m
        alertname: InferprobeInvalidOutputs
        exp_alerts: []
""" + firing("40m") + firing("59m")
import sys
out = sys.argv[1] if len(sys.argv) > 1 else "config/prometheus/tests/capability.test.yml"
open(out, "w").write(header + "\n".join(lines) + "\n" + tail)
