#!/usr/bin/env bash
# inferprobe beside the Prometheus blackbox exporter (Debian's prometheus-blackbox-exporter),
# both probing one HTTPS simulator whose TLS handshake is slowed by a known delay, each with
# a new connection per probe. Prints, per phase, the median of each over the same minute,
# and the certificate expiry each reports; fails when a phase's medians differ by more than
# a millisecond or the expiries by more than a second (issue 59's acceptance).
#
#   bash scripts/blackbox-side-by-side.sh [PROBES]     # default 60 probes each
#
# The phases compared are resolve, connect and tls (the time before the first byte that
# the connection costs); processing is printed too, but the two send different requests
# (the blackbox exporter a GET of /health, inferprobe a chat completion), so it is not held.
set -euo pipefail
cd "$(dirname "$0")/.."
probes=${1:-60}
if ! command -v prometheus-blackbox-exporter >/dev/null || ! command -v openssl >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq </dev/null
  apt-get install -y -qq --no-install-recommends prometheus-blackbox-exporter openssl </dev/null >/dev/null
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

cargo build --quiet --release
bin=${CARGO_TARGET_DIR:-target}/release/inferprobe
read -r sim_port daemon_port bb_port < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)

# A CA and a leaf for localhost that ends in 10 days, so both read a name through DNS
# (/etc/hosts) and verify the chain with the same CA file.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -subj /CN=side-by-side-ca -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -keyout "$tmp/key.pem" -out "$tmp/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$tmp/ext"
openssl x509 -req -in "$tmp/leaf.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca-key.pem" \
  -CAcreateserial -days 10 -extfile "$tmp/ext" -out "$tmp/cert.pem" 2>/dev/null

"$bin" simulate --listen "127.0.0.1:$sim_port" --ttft 20ms --itl 2ms \
  --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --tls-handshake-delay 25ms \
  >"$tmp/sim.log" 2>&1 &
pids+=($!)
cat >"$tmp/inferprobe.toml" <<EOF
[[targets]]
name = "side"
url = "https://localhost:$sim_port"
model = "m"
rate = 2
output_tokens = 4
connection = "fresh"
tls_ca_file = "$tmp/ca.pem"
EOF
"$bin" run --config "$tmp/inferprobe.toml" --listen "127.0.0.1:$daemon_port" >"$tmp/daemon.log" 2>&1 &
pids+=($!)
cat >"$tmp/blackbox.yml" <<EOF
modules:
  https:
    prober: http
    timeout: 5s
    http:
      preferred_ip_protocol: ip4
      tls_config:
        ca_file: $tmp/ca.pem
EOF
prometheus-blackbox-exporter --config.file "$tmp/blackbox.yml" \
  --web.listen-address "127.0.0.1:$bb_port" >"$tmp/blackbox.log" 2>&1 &
pids+=($!)
sleep 2

python3 - "$probes" "$sim_port" "$daemon_port" "$bb_port" <<'EOF'
import re, statistics, sys, time, urllib.request
probes, sim, daemon, bb = int(sys.argv[1]), *sys.argv[2:]

def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()

def value(text, name, **labels):
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, v = line.rpartition(" ")
        if all(f'{k}="{w}"' in head for k, w in labels.items()) and head.split("{")[0] == name:
            return float(v)
    return None

phases = ["resolve", "connect", "tls", "processing"]
blackbox = {p: [] for p in phases}
expiry_bb = None
target = f"https://localhost:{sim}/health"
for _ in range(probes):
    text = get(f"http://127.0.0.1:{bb}/probe?module=https&target={target}")
    if value(text, "probe_success") != 1:
        sys.exit(f"FAIL: the blackbox exporter's probe failed:\n{text}")
    for p in phases:
        blackbox[p].append(value(text, "probe_http_duration_seconds", phase=p))
    expiry_bb = value(text, "probe_ssl_earliest_cert_expiry")
    time.sleep(0.5)

text = get(f"http://127.0.0.1:{daemon}/metrics")
# inferprobe's medians from its histograms' classic buckets are coarse (doubling bounds):
# the mean (sum / count) is what the comparison can hold to a millisecond.
ours, bbm = {}, {}
for p in phases:
    s = value(text, "inferprobe_connection_phase_seconds_sum", phase=p)
    c = value(text, "inferprobe_connection_phase_seconds_count", phase=p)
    ours[p] = (s / c, int(c)) if s is not None and c else (None, 0)
    bbm[p] = statistics.fmean(blackbox[p])
expiry_ours = value(text, "inferprobe_tls_earliest_cert_expiry_timestamp_seconds", chain="server")

print(f"{'phase':<11} {'blackbox (mean of ' + str(probes) + ')':>24} {'inferprobe (mean)':>22}  diff")
failed = []
for p in phases:
    mean, count = ours[p]
    if mean is None:
        failed.append(f"{p}: inferprobe recorded none")
        continue
    diff = (mean - bbm[p]) * 1000
    print(f"{p:<11} {bbm[p]*1000:>20.3f} ms {mean*1000:>15.3f} ms ({count:>3}) {diff:+.3f} ms")
    if p != "processing" and abs(diff) > 1.0:
        failed.append(f"{p}: {diff:+.3f} ms apart")
print(f"certificate expiry: blackbox {expiry_bb:.0f}, inferprobe {expiry_ours:.0f}, "
      f"{(expiry_ours or 0) - (expiry_bb or 0):+.0f} s")
if expiry_ours is None or expiry_bb is None or abs(expiry_ours - expiry_bb) > 1:
    failed.append("certificate expiry differs by more than a second")
if failed:
    sys.exit("FAIL: " + "; ".join(failed))
print("side by side: PASS")
EOF
