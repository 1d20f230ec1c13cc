# Sourced by .ci/run: the venv with botocore (the AWS SDK for Python) that
# tests/aws_cross_check.rs checks SigV4 signatures and event-stream frames against.
# Pinned with its dependencies. Needs the network only for PyPI, once.
AWS_VENV=${AWS_VENV:-target/aws-venv}
AWS_REQUIREMENTS="botocore==1.44.8 jmespath==1.1.0 python-dateutil==2.9.0.post0 six==1.17.0 urllib3==2.8.0"
printf '\n==> venv %s: %s\n' "$AWS_VENV" "$AWS_REQUIREMENTS"
if [ ! -x "$AWS_VENV/bin/python" ]; then
  python3 -m venv "$AWS_VENV"
fi
if [ "$(cat "$AWS_VENV/.requirements" 2>/dev/null || true)" != "$AWS_REQUIREMENTS" ]; then
  # shellcheck disable=SC2086 # one word per requirement
  "$AWS_VENV/bin/pip" install --quiet --disable-pip-version-check $AWS_REQUIREMENTS </dev/null
  echo "$AWS_REQUIREMENTS" >"$AWS_VENV/.requirements"
fi
export INFERPROBE_BOTOCORE_PYTHON="$PWD/$AWS_VENV/bin/python"
