#!/usr/bin/env bash
# The README's picture of the status page: `inferprobe demo` for SECONDS (default 60), then
# headless Chromium (Debian's package, which .ci/run installs) takes docs/img/status-page.png.
#
#   bash scripts/screenshot.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
cargo build --release --quiet --bin inferprobe
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/inferprobe demo --listen "127.0.0.1:$port" --log-level warn >/dev/null 2>&1 &
demo=$!
trap 'kill $demo 2>/dev/null || true; wait 2>/dev/null || true' EXIT
sleep "$SECONDS_TO_RUN"
profile=$(mktemp -d)
mkdir -p docs/img
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --window-size=1280,1500 \
  --screenshot=docs/img/status-page.png "http://127.0.0.1:$port/" 2>/dev/null
rm -rf "$profile"
echo "wrote docs/img/status-page.png ($(stat -c %s docs/img/status-page.png) bytes)"
