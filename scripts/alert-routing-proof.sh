#!/usr/bin/env bash
# Proof with a real Alertmanager that every firing inferprobe alert reaches a team's receiver
# under kube-prometheus-stack's default Alertmanager configuration plus one AlertmanagerConfig
# in the probe's namespace (docs/alerts.md, "Proven against kube-prometheus-stack").
#
#  1. tests/fixtures/alertmanager/kps-default.yaml: kps's default `alertmanager.config`
#     (its header cites repository, path and commit); team-amconfig.yaml: the team's
#     AlertmanagerConfig (namespace inferprobe, critical|warning -> receiver `oncall`).
#  2. scripts/alert_routing.py merge converts the AlertmanagerConfig as the Prometheus Operator
#     does (receiver inferprobe/inferprobe-oncall/oncall, `namespace="inferprobe"` appended to
#     the route's matchers by the default OnNamespace strategy, continue: true, inserted before
#     kps's Watchdog route) and writes the merged configuration.
#  3. Every alert's firing label sets: each exp_labels of config/prometheus/tests/*.test.yml
#     (promtool's pinned firing instances; an alert without one fails the proof), with the
#     labels of that alert in `gen-prometheusrule.sh -o -` applied as Prometheus would (the
#     static `namespace` over the series' own, the severity; a rule label with a template
#     fails: the contract's labels are literal, the series' namespace is the annotation
#     replica_namespace). With
#     charts/inferprobe and target/helm/helm present, the chart's default `helm template`
#     PrometheusRule too.
#  4. `amtool check-config`, then `amtool config routes test` per label set: every critical
#     and warning set must reach the team's receiver only (info: the team's or null). Then a
#     real Alertmanager (Debian's, 127.0.0.1, free port, clustering off; the test copy's
#     group_wait/group_interval are 1s and its webhook points at a local recorder): a lone
#     critical alert is posted and must be delivered, then every set at once, and every
#     critical and warning one must be delivered to the team's webhook and not inhibited by
#     kps's inhibit rules.
#  5. Negative control: the old contract (`--no-namespace-label --severity
#     critical=page,warning=ticket`) must send every page to `null`; if it does not, the
#     proof could not fail, and it fails.
#  6. A table: alert, severity, firing sets, receiver, live delivery, old contract.
#
# Needs python3 with PyYAML and Debian's prometheus-alertmanager (amtool and
# prometheus-alertmanager). Without them it skips, unless INFERPROBE_REQUIRE_AMTOOL is set
# (CI), when it fails. Everything is on 127.0.0.1, bounded, and stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3 # the system's PyYAML (python3-yaml)
alertmanager=/usr/bin/prometheus-alertmanager
if ! command -v amtool >/dev/null 2>&1 || [ ! -x "$alertmanager" ]; then
  if [ -n "${INFERPROBE_REQUIRE_AMTOOL:-}" ]; then
    echo "alert-routing-proof: amtool or $alertmanager missing (Debian: apt-get install prometheus-alertmanager)" >&2
    exit 1
  fi
  echo "alert-routing-proof: SKIPPED: no amtool or $alertmanager (apt-get install prometheus-alertmanager; INFERPROBE_REQUIRE_AMTOOL=1 makes this fail)"
  exit 0
fi
if ! "$python" -c 'import yaml' 2>/dev/null; then
  [ -x target/deploy-venv/bin/python3 ] && python=target/deploy-venv/bin/python3
  "$python" -c 'import yaml' || { echo "alert-routing-proof: no PyYAML for $python" >&2; exit 1; }
fi
amtool --version 2>&1 | head -1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx=tests/fixtures/alertmanager
team=inferprobe/inferprobe-oncall/oncall # <namespace>/<name>/<receiver>, as the Operator names it
ar() { "$python" scripts/alert_routing.py "$@"; }

echo "== merged configuration: $fx/kps-default.yaml + $fx/team-amconfig.yaml (Operator conversion)"
ar merge "$fx/kps-default.yaml" "$fx/team-amconfig.yaml" --out "$tmp/merged.yml"
amtool check-config "$tmp/merged.yml" | sed 's/^/  /'
"$python" -c 'import sys,yaml; print(yaml.safe_dump(yaml.safe_load(open(sys.argv[1]))["route"], sort_keys=False))' \
  "$tmp/merged.yml" | sed 's/^/  route: /'

echo "== the alert-label contract (gen-prometheusrule.sh defaults)"
bash scripts/gen-prometheusrule.sh -o "$tmp/contract.yaml"
ar cases "$tmp/contract.yaml" --tests 'config/prometheus/tests/*.test.yml' --out "$tmp/contract-cases.json"
ar route "$tmp/merged.yml" "$tmp/contract-cases.json" --mode contract --team "$team" --out "$tmp/contract-routed.json"
echo "  every critical and warning firing label set routes to $team (amtool)"

chart_args=()
if [ -d charts/inferprobe ] && [ -x target/helm/helm ]; then
  echo "== the chart's default PrometheusRule (helm template charts/inferprobe --namespace inferprobe)"
  if target/helm/helm template inferprobe charts/inferprobe --namespace inferprobe \
    --set-file config=config/kubernetes/inferprobe.toml >"$tmp/chart.yaml" 2>"$tmp/chart.err"; then
    "$python" - "$tmp/chart.yaml" "$tmp/chart-rule.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "PrometheusRule"]
if docs:
    yaml.safe_dump({"spec": {"groups": [g for d in docs for g in d["spec"]["groups"]]}}, open(sys.argv[2], "w"))
PY
    if [ -s "$tmp/chart-rule.yaml" ]; then
      ar cases "$tmp/chart-rule.yaml" --tests 'config/prometheus/tests/*.test.yml' --out "$tmp/chart-cases.json"
      ar route "$tmp/merged.yml" "$tmp/chart-cases.json" --mode contract --team "$team" --out "$tmp/chart-routed.json"
      echo "  the chart's alerts route the same"
      chart_args=(--chart "$tmp/chart-routed.json")
    else
      echo "  NOTE: the chart renders no PrometheusRule with its defaults: not checked"
    fi
  else
    echo "  NOTE: helm template charts/inferprobe failed, the chart is not checked: $(head -c 300 "$tmp/chart.err")"
  fi
else
  echo "== NOTE: charts/inferprobe or target/helm/helm absent: the chart's PrometheusRule is not checked"
fi

chart_amc=
if [ -d charts/inferprobe ] && [ -x target/helm/helm ]; then
  echo "== the chart's AlertmanagerConfig (alertmanagerConfig.enabled, critical and warning to one webhook receiver)"
  cat >"$tmp/amc.values" <<'YAML'
alertmanagerConfig:
  enabled: true
  receivers:
    - name: oncall
      webhookConfigs:
        - url: https://oncall.example.com/hooks/alertmanager
          sendResolved: true
  critical: {receiver: oncall}
  warning: {receiver: oncall}
YAML
  target/helm/helm template inferprobe charts/inferprobe --namespace inferprobe \
    --set-file config=config/kubernetes/inferprobe.toml -f "$tmp/amc.values" \
    --show-only templates/alertmanagerconfig.yaml >"$tmp/chart-amc.yaml"
  ar merge "$fx/kps-default.yaml" "$tmp/chart-amc.yaml" --out "$tmp/merged-chart.yml"
  amtool check-config "$tmp/merged-chart.yml" | sed 's/^/  /'
  ar route "$tmp/merged-chart.yml" "$tmp/contract-cases.json" --mode contract \
    --team inferprobe/inferprobe/oncall --out "$tmp/chart-amc-routed.json"
  echo "  every critical and warning firing label set routes to inferprobe/inferprobe/oncall (amtool)"
  chart_amc=1
fi

echo "== negative control: the old contract (severity page|ticket, no namespace label)"
bash scripts/gen-prometheusrule.sh -o "$tmp/old.yaml" --no-namespace-label --severity critical=page,warning=ticket
ar cases "$tmp/old.yaml" --tests 'config/prometheus/tests/*.test.yml' --out "$tmp/old-cases.json"
ar route "$tmp/merged.yml" "$tmp/old-cases.json" --mode control --team "$team" --out "$tmp/old-routed.json"
echo "  every page routes to null under the old contract: the proof can fail"

echo "== a real Alertmanager ($alertmanager), the merged configuration, every firing label set posted"
ar live "$tmp/merged.yml" "$tmp/contract-routed.json" --team "$team" --alertmanager "$alertmanager" \
  --workdir "$tmp" --out "$tmp/live.json"

if [ -n "$chart_amc" ]; then
  mkdir -p "$tmp/live-chart"
  ar live "$tmp/merged-chart.yml" "$tmp/chart-amc-routed.json" --team inferprobe/inferprobe/oncall \
    --alertmanager "$alertmanager" --workdir "$tmp/live-chart" --out "$tmp/live-chart.json"

  # Delivery at the real timings: kps's root route (group_by [namespace], group_interval 5m)
  # under an AlertmanagerConfig without a groupBy of its own (the team's, less its groupBy),
  # and under the chart's. A fast burn of target vllm fires first; then its TargetDown.
  wait=${ALERT_DELIVERY_WAIT:-60}
  echo "== delivery of a page while another inferprobe alert is open (real timings; the default route waited on for $wait s)"
  "$python" -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1])); d["spec"]["route"].pop("groupBy")
yaml.safe_dump(d, open(sys.argv[2], "w"), sort_keys=False)' "$fx/team-amconfig.yaml" "$tmp/plain-amc.yaml"
  ar merge "$fx/kps-default.yaml" "$tmp/plain-amc.yaml" --out "$tmp/merged-plain.yml"
  "$python" scripts/alert_delivery.py "$tmp/merged-plain.yml" --alertmanager "$alertmanager" \
    --workdir "$tmp/delivery-plain" --wait "$wait" --out "$tmp/delivery-plain.json" >/dev/null &
  plain_pid=$!
  "$python" scripts/alert_delivery.py "$tmp/merged-chart.yml" --alertmanager "$alertmanager" \
    --workdir "$tmp/delivery-chart" --wait 60 --out "$tmp/delivery-chart.json" >/dev/null
  wait "$plain_pid"
  "$python" - "$tmp/delivery-plain.json" "$tmp/delivery-chart.json" "$wait" <<'PY'
import json, sys
plain, chart, wait = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
print(f"  default route (group_by namespace): first alert delivered after {plain['opener_s']} s; "
      f"InferprobeTargetDown {'not delivered within %.0f s' % wait if plain['page_s'] is None else 'delivered %s s after it fired' % plain['page_s']}")
print(f"  chart's AlertmanagerConfig: first alert after {chart['opener_s']} s; "
      f"InferprobeTargetDown {chart['page_s']} s after it fired")
if chart["page_s"] is None or chart["page_s"] > 20:
    sys.exit("FAIL: under the chart's AlertmanagerConfig the page took more than 20 s (groupWait 10s)")
if plain["page_s"] is not None and plain["page_s"] < 30:
    sys.exit("FAIL: under the default route the page was not held by the open group: the proof cannot tell them apart")
PY
fi

echo
ar table "$tmp/contract-routed.json" --live "$tmp/live.json" --control "$tmp/old-routed.json" ${chart_args[@]+"${chart_args[@]}"}
echo
echo "alert routing proof passed in $(($(date +%s) - start)) s"
