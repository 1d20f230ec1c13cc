#!/usr/bin/env bash
# Proof that the 30-day error budget is the truth where 31 days of the recorded 5-minute
# rates are kept, and says it is short where they are not (docs/alerts.md, "Windows and
# retention"). It writes 31 days of a target's counters (3.3% of probes failing in days 0-20
# of the last 30, none after; true budget left -1.22 at 99%), backfills them into a TSDB
# (`promtool tsdb create-blocks-from openmetrics`), backfills the shipped
# inferprobe-sli-rate5m group from them (`promtool tsdb create-blocks-from rules` against a
# Prometheus holding the raw samples), and at the end of the 31 days compares, on Debian's
# Prometheus: the old rule (30 days of raw samples) and the shipped one, in a global store
# keeping only the recorded series for 40 days and in a cluster's Prometheus keeping 10;
# the share of the window covered; InferprobeSLOWindowShort's expression; and the samples
# each evaluation reads (/api/v1/query?stats=all). scripts/backfill_proof.py has the details.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage: bash scripts/backfill-proof.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/need-prometheus.sh  # Debian's prometheus and promtool; sets prometheus, python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 600 "$python" scripts/backfill_proof.py "$tmp" "$prometheus"
