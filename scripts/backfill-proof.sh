#!/usr/bin/env bash
# Proof that the error budget is the truth over its window where the window and a day of the
# recorded 5-minute rates are kept, and shows no number where they are not (docs/alerts.md,
# "Windows and retention"; issue 56). It writes 31 days of a target's counters (3.3% of
# probes failing until 10 days ago, 0.5% since: true budget left about -1.4 over 30 days and
# 0.5 over 7 at 99%), backfills them into a TSDB (`promtool tsdb create-blocks-from
# openmetrics`), backfills the shipped inferprobe-sli-rate5m group from them (`promtool tsdb
# create-blocks-from rules` against a Prometheus holding the raw samples), and at the end of
# the 31 days compares, on Debian's Prometheus: the old rule (30 days of raw samples); the
# 30-day window (scripts/gen-slo-rules.py --window 30d) in a global store keeping only the
# recorded series for 40 days (the truth) and in a cluster's Prometheus keeping 10 (no
# sample, where it read a wrong number before); the shipped 7-day window there (the truth);
# the share of each window covered; InferprobeSLOWindowShort, the standing alert it was and
# the one it is (said once, not at the end); and the samples each evaluation reads
# (/api/v1/query?stats=all). scripts/backfill_proof.py has the details.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage: bash scripts/backfill-proof.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/need-prometheus.sh  # Debian's prometheus and promtool; sets prometheus, python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 600 "$python" scripts/backfill_proof.py "$tmp" "$prometheus"
