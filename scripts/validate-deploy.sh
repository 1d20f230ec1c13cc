#!/usr/bin/env bash
# Offline validation of the deployment files: config/kubernetes/ (the Kustomize base) and the
# Dockerfile. Needs no cluster and no Docker engine; the network only for PyPI, once, to fill
# a venv under target/. Run from anywhere:  bash scripts/validate-deploy.sh
#
#  1. kustomization.yaml is well-formed and every file it names exists; every manifest in
#     the directory is listed (secret.example.yaml deliberately is not); the same for the
#     Component namespaced/ (namespaced RBAC instead of the ClusterRole).
#  2. Two variants render: the base, and the base with namespaced/ (`kubectl kustomize` when
#     kubectl is installed, else the files as listed plus the generated ConfigMap, rendered
#     the way kustomize would).
#  3. kubernetes-validate --strict checks the core kinds (and the example Secret) of each
#     against the API schemas of $KUBE_VERSIONS.
#  4. scripts/validate_deploy.py checks what no schema knows: the PodMonitor and
#     PrometheusRule structure, labels and selectors that must agree, the DaemonSet's
#     security settings, probes, env and mounts against the daemon's config, the label
#     semantics (probe_pod for the probe; pod and namespace only for replicas), and the
#     RBAC: bindings name the ServiceAccount and an existing role, roles only read, and
#     they let every [[discovery]] block and the fleet list and watch what they read.
#  5. prometheusrule.yaml equals a fresh scripts/gen-prometheusrule.sh (no drift from
#     config/prometheus/*.yml); promtool checks the rules when it is installed.
#  6. `inferprobe check` accepts the ConfigMap's configuration (secret paths pointed at a
#     placeholder key file, NODE_NAME/POD_NAME/POD_NAMESPACE set) and every example in
#     examples/, whose API reads both RBAC variants must grant.
#  7. hadolint finds nothing in the Dockerfile; the files it copies (through .dockerignore)
#     are all cargo needs: `cargo fetch --locked` parses the manifest and every target there.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S=config/kubernetes
step() { printf '\n==> %s\n' "$*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The pinned tools (kubernetes-validate, hadolint, PyYAML) and KUBE_VERSIONS.
source scripts/deploy-venv.sh
"$VENV/bin/kubernetes-validate" --version
"$VENV/bin/hadolint" --version

step "kustomization.yaml: well-formed, every resource present and listed; the Component namespaced/"
"$py" scripts/validate_deploy.py kustomization "$K8S"
"$py" scripts/validate_deploy.py component "$K8S/namespaced"

# render NAME [COMPONENT]: $work/NAME.yaml, the base (with COMPONENT) as kustomize builds it.
render() {
  local name=$1 component=${2:-} dir="$K8S"
  if [ -n "$component" ]; then
    # kustomize refuses a kustomization inside its own base: an overlay in $work uses both.
    dir="$work/overlay-$name"
    "$py" scripts/validate_deploy.py overlay "$dir" "$K8S" "$component"
  fi
  # DEPLOY_RENDER=python forces the fallback (to test it where kubectl is installed).
  if [ "${DEPLOY_RENDER:-}" != python ] && command -v kubectl >/dev/null 2>&1 &&
    kubectl kustomize "$dir" >"$work/$name.yaml" 2>"$work/kustomize.err"; then
    echo "kubectl kustomize ($name): $(grep -c '^kind:' "$work/$name.yaml") objects"
  elif [ "${DEPLOY_RENDER:-}" != python ] && command -v kustomize >/dev/null 2>&1 &&
    kustomize build "$dir" >"$work/$name.yaml" 2>"$work/kustomize.err"; then
    echo "kustomize build ($name): $(grep -c '^kind:' "$work/$name.yaml") objects"
  else
    if grep -q 'unknown field "components"' "$work/kustomize.err" 2>/dev/null; then
      # Debian's kubectl (1.20) embeds a kustomize older than Components (kustomize 3.7).
      echo "this kubectl's kustomize predates Components: rendering $name in Python"
    elif [ -s "$work/kustomize.err" ]; then
      cat "$work/kustomize.err" >&2
      fail "kustomize could not render $name"
    else
      echo "no kubectl or kustomize here: rendering $name (listed files, generated ConfigMap) in Python"
    fi
    "$py" scripts/validate_deploy.py render "$K8S" $component >"$work/$name.yaml"
  fi
}

# variant NAME MODE [COMPONENT]: render, schema-validate and cross-check one variant.
variant() {
  local name=$1 mode=$2 component=${3:-}
  step "render the $name variant${component:+ (base + $component)}"
  render "$name" "$component"
  "$py" scripts/validate_deploy.py split "$work/$name.yaml" "$work/$name-core.yaml" "$work/$name-crds.yaml"

  step "kubernetes-validate --strict ($name: core kinds, and the example Secret)"
  for v in $KUBE_VERSIONS; do
    "$VENV/bin/kubernetes-validate" --strict --quiet -k "$v" "$work/$name-core.yaml" "$K8S/secret.example.yaml" ||
      fail "kubernetes-validate --strict -k $v ($name)"
    echo "Kubernetes $v: ok"
  done

  step "PodMonitor, PrometheusRule, RBAC and cross-object checks ($name)"
  "$py" scripts/validate_deploy.py objects "$work/$name.yaml" "$K8S/secret.example.yaml" "$mode"
}

variant base cluster
variant namespaced namespaced "$K8S/namespaced"
cp "$work/base.yaml" "$work/rendered.yaml"

step "prometheusrule.yaml is what scripts/gen-prometheusrule.sh makes of config/prometheus/*.yml"
bash scripts/gen-prometheusrule.sh -o "$work/prometheusrule.yaml" 2>/dev/null
if ! diff -u "$K8S/prometheusrule.yaml" "$work/prometheusrule.yaml" >"$work/rules.diff"; then
  head -40 "$work/rules.diff" >&2
  fail "$K8S/prometheusrule.yaml is out of date: run  bash scripts/gen-prometheusrule.sh"
fi
"$py" scripts/validate_deploy.py rules-match "$K8S/prometheusrule.yaml" config/prometheus/*.yml
if command -v promtool >/dev/null 2>&1; then
  "$py" scripts/validate_deploy.py rules-file "$K8S/prometheusrule.yaml" >"$work/rules.yml"
  promtool check rules "$work/rules.yml" | grep . | sed 's/^/promtool: /'
else
  echo "(promtool not installed: its rule check skipped; .ci/run installs it)"
fi

step "inferprobe check on the ConfigMap's configuration"
cargo build --quiet
bin=${CARGO_TARGET_DIR:-target}/debug/inferprobe
# What the DaemonSet's downward API sets.
pod_env=(NODE_NAME=validate-node POD_NAME=validate-pod POD_NAMESPACE=inferprobe)
"$py" scripts/validate_deploy.py config "$work/rendered.yaml" "$work/secrets" >"$work/config.toml"
env "${pod_env[@]}" "$bin" check --config "$work/config.toml" ||
  fail "inferprobe check rejected the ConfigMap's configuration"

step "the examples in examples/: inferprobe check, and both RBAC variants grant their reads"
shopt -s nullglob
examples=(examples/*.toml)
shopt -u nullglob
[ ${#examples[@]} -gt 0 ] || fail "no examples in examples/"
# API keys come from files a Secret would mount: write stand-ins and point the copy at them.
mkdir -p "$work/keys"
for key in openai anthropic together gemini; do echo "sk-validate" >"$work/keys/$key"; done
for example in "${examples[@]}"; do
  sed "s|/var/run/secrets/inferprobe/|$work/keys/|g" "$example" >"$work/example.toml"
  env "${pod_env[@]}" "$bin" check --config "$work/example.toml" || fail "inferprobe check rejected $example"
done
"$py" scripts/validate_deploy.py rbac-covers "$work/base.yaml" "${examples[@]}"
"$py" scripts/validate_deploy.py rbac-covers "$work/namespaced.yaml" "${examples[@]}"

step "hadolint Dockerfile (any finding fails)"
"$VENV/bin/hadolint" --no-color --failure-threshold style Dockerfile || fail "hadolint Dockerfile"
"$py" scripts/validate_deploy.py dockerfile Dockerfile "$work/rendered.yaml"

step "the Docker build stage's sources are complete (cargo fetch --locked in a copy of them)"
"$py" scripts/validate_deploy.py docker-context Dockerfile .dockerignore "$work/context"
(cd "$work/context" && cargo fetch --locked --quiet) ||
  fail "cargo cannot build from the files the Dockerfile copies: add the missing ones to the Dockerfile's COPY lines and to .dockerignore"

step "deployment files valid"
