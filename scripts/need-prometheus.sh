# Sourced by the scripts that run a real Prometheus (prometheus-proof.sh, federation-proof.sh,
# backfill-proof.sh), from the repository root: installs Debian's prometheus (the server and
# promtool) and python3 where missing (as root; apt reads no stdin), and sets `prometheus`
# and `python` (the system's python3, not a virtualenv's: the proofs need only its standard
# library and PyYAML from Debian where present).
missing=()
{ [ -x /usr/bin/prometheus ] && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# The proof's HTTPS simulator gets a certificate made on the spot.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq </dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi
prometheus=/usr/bin/prometheus
python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3
"$prometheus" --version 2>&1 | head -1
