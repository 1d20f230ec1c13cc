"""PromQL as every panel writes it: the matchers of the template variables, the site labels
first in every grouping, and the per-target histograms read the same way everywhere.

**Histograms in a mixed fleet.** A Prometheus stores a daemon's histogram as native series
(protobuf scrape, native histograms on), as classic `_bucket`/`_count`/`_sum` series, or as
both (`scrape_classic_histograms` / `always_scrape_classic_histograms`). One fleet can hold
all three at once: a DaemonSet upgraded from a text-only version, the window after a
`[metrics] histograms` switch, two clusters behind one Thanos. A query that aggregates first
and then takes `native or classic` drops every classic member of a group that has one
native member (the two sides' groups match), and a heatmap of `sum(native) or sum by (le)
(classic)` keeps both (their label sets never match). So here:

- counts and sums pick a side **per series**, before aggregating:
  `sum by (g) (histogram_count(rate(h[w])) or rate(h_count[w]))` (a series with both keeps its
  native count, once);
- quantiles are read per kind, each over the members of that kind, and say which
  (`histograms="native"` / `"classic"`, in the legend): a group of one kind is one line, a
  mixed group two, each exact for its members; no member is dropped and none is counted
  twice (classic buckets of a series that also has a native histogram are left to the
  native line). Converting one kind to the other for one merged quantile would repeat the
  native selector once per bound: affordable in one target's heatmap, not in every quantile
  of every target;
- heatmaps draw one picture on the classic bounds: the classic buckets, plus each native-only
  series' count at every classic bound (`histogram_fraction(0, le, h) * histogram_count(h)`),
  summed by `le`.
"""

import re

from .config import CONFIG

RATE = "$__rate_interval"

# The site labels, first in every grouping by a target-level label, and their matchers.
SITE = ", ".join(CONFIG["site_labels"])
SITE_MATCH = ", ".join(f'{l}=~"${l}"' for l in CONFIG["site_labels"])
# The matchers every inferprobe selector carries: the site labels, then the variables.
S = ", ".join(f'{v}=~"${v}"' for v in CONFIG["site_labels"] + CONFIG["variables"])

# What a recording rule's selector matches besides the sites: the SLO rules aggregate the
# model and node away, so only the target variable applies to every rule.
TARGET = 'target=~"$target"'

# Every finished probe, and every failed one: what most ratios divide.
REQUESTS = "inferprobe_requests_total"
ERRORS = "inferprobe_request_errors_total"
# The latency histograms, with what each measures as the panels say it.
TTFT_SECONDS = "inferprobe_time_to_first_token_seconds"
TPOT_SECONDS = "inferprobe_time_per_output_token_seconds"
ITL_SECONDS = "inferprobe_inter_token_latency_seconds"
E2EL_SECONDS = "inferprobe_e2e_request_latency_seconds"
LATENCIES = {
    "TTFT": (TTFT_SECONDS, "time to first token (t0 to the first token-carrying event)"),
    "TPOT": (TPOT_SECONDS, "time per output token after the first"),
    "ITL": (ITL_SECONDS, "inter-token latency (gap between successive tokens)"),
    "E2EL": (E2EL_SECONDS, "end-to-end request latency"),
}

# The classic bucket bounds of each per-target histogram, as the daemon exports them
# (src/metrics/values.rs; tests/dashboards.rs holds them to a live daemon's `le` values).
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TOKEN_LATENCY = [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.025, 0.05, 0.075,
                 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                 80.0]
E2EL = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
        120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
BOUNDS = {
    TTFT_SECONDS: TTFT,
    TPOT_SECONDS: TOKEN_LATENCY,
    ITL_SECONDS: TOKEN_LATENCY,
    E2EL_SECONDS: E2EL,
    "inferprobe_prefix_cache_cold_ttft_seconds": TTFT,
    "inferprobe_prefix_cache_warm_ttft_seconds": TTFT,
}


def sel(*extra):
    """The variables' matchers, and `extra` ones."""
    return "{" + ", ".join([S, *extra]) + "}"


def by(*labels):
    """A grouping by the site labels and `labels`."""
    return ", ".join(CONFIG["site_labels"] + [l for l in labels if l not in CONFIG["site_labels"]])


def summed(metric, *labels, fn="rate", window=RATE, extra=()):
    """`fn` of the counter `metric` over `window`, summed by the site labels and `labels`."""
    return f"sum by ({', '.join([SITE, *labels])}) ({fn}({metric}{sel(*extra)}[{window}]))"


def success_ratio(label):
    """1 - errors / requests per `label`, over the rate interval."""
    return f"1 - (\n  {summed(ERRORS, label)}\n  /\n  {summed(REQUESTS, label)}\n)"


def since_last_success():
    """Seconds since each target's last successful probe on any node picked."""
    return f"time() - max by ({SITE}, target) (inferprobe_last_success_timestamp_seconds{sel()})"


def per_probe(metric):
    """The rate of the counter `metric` over the rate of finished probes, per target."""
    return f"{summed(metric, 'target')}\n/\n{summed(REQUESTS, 'target')}"


def recorded(rule, *extra):
    """A recording rule's series of the sites and targets picked, and `extra` matchers."""
    return f"{rule}{{{', '.join([SITE_MATCH, TARGET, *extra])}}}"


def burn_rate(sli, window):
    """How fast the SLI `sli` spent the error budget over `window` (1: in exactly its window)."""
    return (f"{recorded(f'inferprobe:sli_{sli}:ratio_rate{window}')}\n/ on ({SITE}, target)\n"
            f"{recorded('inferprobe:error_budget:ratio')}")


def le_text(bound):
    """A bound as the daemon's classic buckets spell `le` (`1.0`, `0.25`; Python's shortest
    repr agrees with prometheus-client's and Go's OpenMetrics formatting for every bound
    here: tests/dashboard_bounds.rs checks them against a live daemon)."""
    return repr(float(bound))


def _series(metric, fn, window, extra, suffix=""):
    return f"{fn}({metric}{suffix}{sel(*extra)}[{window}])"


def _native(metric, fn, window, extra):
    """The native series over the window, less those now exported as classic alone: after
    a switch from native to classic (or a rollback to a text-only version) the native
    series still has the window's pre-switch data, and would hide the classic series'
    newer data from every `native or classic` choice until it leaves the window."""
    s = sel(*extra)
    return f"({_series(metric, fn, window, extra)} unless ({metric}_count{s} unless {metric}{s}))"


def quantile(q, metric, *labels, fn="rate", window=RATE, extra=(), row=False):
    """The `q` quantile of `metric` per group, per kind of histogram (module doc). Even a
    grouping by `node` can mix kinds: during a DaemonSet upgrade the old and the new probe
    pod on a node are two series, one of each kind. `row`: one value per group, for a table
    that merges queries by their labels (a group that mixes kinds shows its native members)."""
    g = by(*labels)
    native = _native(metric, fn, window, extra)
    buckets = _series(metric, fn, window, extra, "_bucket")
    if row:
        return (f"(histogram_quantile({q}, sum by ({g}) ({native})) or histogram_quantile({q}, "
                f"sum by ({g}, le) ({buckets} unless ignoring (le) {native})))")
    return (
        f'label_replace(histogram_quantile({q}, sum by ({g}) ({native})), '
        f'"histograms", "native", "", "") or '
        f'label_replace(histogram_quantile({q}, sum by ({g}, le) ({buckets} unless ignoring (le) {native})), '
        f'"histograms", "classic", "", "")'
    )


def mean(metric, *labels, fn="rate", window=RATE, extra=()):
    """The mean of `metric` per group, each series counted once, of whichever kind."""
    g = by(*labels)

    def side(native_fn, suffix):
        return (f"sum by ({g}) ({native_fn}({_native(metric, fn, window, extra)}) or "
                f"{_series(metric, fn, window, extra, suffix)})")

    return f"({side('histogram_sum', '_sum')} / {side('histogram_count', '_count')})"


def heatmap(metric, fn="rate", window=RATE, extra=()):
    """Counts per classic bound, summed over every series of either kind (module doc). Only
    the shared bounds: a target's SLO threshold is one more bound of its own classic buckets
    (`src/metrics/values.rs` `with_bound`) that native series cannot be converted to, so it
    is left out rather than drawn from the classic members alone. A native series with no
    observation in the window is left out too (its fraction is NaN, which would blank the
    column)."""
    bounds = BOUNDS[metric]
    shared = "|".join(re.escape(le_text(b)) for b in bounds).replace("\\", "\\\\")
    native = _series(metric, fn, window, extra)
    count = _series(metric, fn, window, extra, "_count")
    buckets = _series(metric, fn, window, (*extra, f'le=~"{shared}|\\\\+Inf"'), "_bucket")
    native_only = f"({native} unless {count})"
    converted = " or ".join(
        f'label_replace(histogram_fraction(0, {b!r}, {native_only}) * (histogram_count({native_only}) > 0), '
        f'"le", "{le_text(b)}", "", "")'
        for b in bounds
    )
    total = f'label_replace(histogram_count({native_only}), "le", "+Inf", "", "")'
    return f"sum by (le) ({buckets} or {converted} or {total})"


# A discovered replica's series (configured targets have no `pod`).
HAS_POD = 'pod!=""'
