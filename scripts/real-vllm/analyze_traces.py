#!/usr/bin/env python3
"""Pair inferprobe's probe spans with vLLM's `llm_request` spans and check the parentage.

Reads the receiver's span lines (otlp_receiver.py). Checks, and prints a report:
  - every probe inferprobe counted has one span (requests_total = spans);
  - every vLLM `llm_request` span shares its trace id with one probe span and names that
    span as its parent (the server continued the probe's `traceparent`);
  - every successful probe has a vLLM child;
  - the child lies inside the parent in time (same machine, same clock);
  - vLLM's request id is the probe's x-request-id (inside vLLM's `chatcmpl-<id>` / `cmpl-<id>-0`);
then the TTFT split: probe TTFT = outside the engine + queue + prefill (vLLM's TTFT).
"""
import argparse
import json
import re
import statistics
import sys


def quantiles(xs):
    xs = sorted(xs)
    if not xs:
        return "n/a"
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    return f"p50 {q(0.5) * 1e3:.2f} ms, p90 {q(0.9) * 1e3:.2f} ms, mean {statistics.mean(xs) * 1e3:.2f} ms"


def total(text, name):
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


def compare_histograms(probe, server):
    """The two sides' own histograms, as a dashboard would read them (sum / count)."""
    rows = [
        ("TPOT", "inferprobe_time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds"),
        ("ITL", "inferprobe_inter_token_latency_seconds", "vllm:inter_token_latency_seconds"),
        ("TTFT", "inferprobe_time_to_first_token_seconds", "vllm:time_to_first_token_seconds"),
    ]
    print("histograms (/metrics), probe vs vLLM:")
    for label, ours, theirs in rows:
        oc, os_ = total(probe, ours + "_count"), total(probe, ours + "_sum")
        tc, ts = total(server, theirs + "_count"), total(server, theirs + "_sum")
        om = os_ / oc * 1e3 if oc else float("nan")
        tm = ts / tc * 1e3 if tc else float("nan")
        print(f"  {label}: probe {oc:.0f} observations, mean {om:.3f} ms; vLLM {tc:.0f} observations, mean {tm:.3f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spans")
    ap.add_argument("--inferprobe-metrics")
    ap.add_argument("--vllm-metrics")
    ap.add_argument("--vllm-version", default="?")
    ap.add_argument("--protocol", default="?")
    ap.add_argument("--vllm-flags", default="")
    args = ap.parse_args()
    spans = [json.loads(line) for line in open(args.spans)]
    probes = [s for s in spans if s["service"] == "inferprobe"]
    server = [s for s in spans if s["name"] == "llm_request"]
    by_trace = {}
    for p in probes:
        by_trace.setdefault(p["trace_id"], []).append(p)
    failures = []

    requests = None
    if args.inferprobe_metrics:
        text = open(args.inferprobe_metrics).read()
        requests = sum(float(v) for v in re.findall(r"^inferprobe_requests_total\{[^}]*\} (\S+)$", text, re.M))
    print(f"vLLM {args.vllm_version} {args.vllm_flags}; inferprobe exported over {args.protocol}")
    print(f"probe spans: {len(probes)} (kind {sorted({p['kind'] for p in probes})}), "
          f"inferprobe requests_total at the scrape: {requests}")
    print(f"vLLM llm_request spans: {len(server)} (kind {sorted({s['kind'] for s in server})})")
    if requests is not None and len(probes) < requests:
        failures.append(f"{requests - len(probes):.0f} probes counted without a span")
    if not probes or not server:
        failures.append("no spans to pair")

    children = same_id = 0
    ok_probes = [p for p in probes if "error.type" not in p["attributes"]]
    with_child = set()
    outside, queue, prefill, server_ttft, probe_ttft, decode = [], [], [], [], [], []
    tpot_pairs = []
    for s in server:
        parents = by_trace.get(s["trace_id"], [])
        if len(parents) != 1:
            failures.append(f"llm_request {s['span_id']}: {len(parents)} probe spans in trace {s['trace_id']}")
            continue
        p = parents[0]
        if s["parent_span_id"] != p["span_id"]:
            failures.append(f"llm_request {s['span_id']}: parent {s['parent_span_id']}, probe span {p['span_id']}")
            continue
        if not (p["start_ns"] <= s["start_ns"] and s["end_ns"] <= p["end_ns"]):
            failures.append(f"llm_request {s['span_id']} not inside its probe span in time")
        children += 1
        with_child.add(p["span_id"])
        a, pa = s["attributes"], p["attributes"]
        # vLLM names the request after the x-request-id it was sent (chatcmpl-<id>, cmpl-<id>-0).
        if str(pa.get("inferprobe.request_id")) not in str(a.get("gen_ai.request.id", "")):
            failures.append(f"llm_request {a.get('gen_ai.request.id')} for probe {pa.get('inferprobe.request_id')}")
        else:
            same_id += 1
        t = pa.get("gen_ai.response.time_to_first_chunk")
        st = a.get("gen_ai.latency.time_to_first_token")
        if t is not None and st is not None:
            probe_ttft.append(t)
            server_ttft.append(st)
            outside.append(t - st)
        n = a.get("gen_ai.usage.completion_tokens") or 0
        if pa.get("inferprobe.tpot") is not None and n > 1:
            # vLLM's own TPOT of a request: its decode time over the tokens after the first.
            tpot_pairs.append((pa["inferprobe.tpot"], a["gen_ai.latency.time_in_model_decode"] / (n - 1)))
        queue.append(a.get("gen_ai.latency.time_in_queue", 0.0))
        prefill.append(a.get("gen_ai.latency.time_in_model_prefill", 0.0))
        decode.append(a.get("gen_ai.latency.time_in_model_decode", 0.0))
    orphans = [p for p in ok_probes if p["span_id"] not in with_child]
    print(f"llm_request spans whose parent is the probe's span: {children} of {len(server)}")
    print(f"server request id = the probe's x-request-id (prefixed): {same_id} of {children}")
    print(f"successful probes with a vLLM child span: {len(ok_probes) - len(orphans)} of {len(ok_probes)}")
    if orphans:
        failures.append(f"{len(orphans)} successful probes without a vLLM child span")
    if server:
        example = server[0]
        parent = by_trace[example["trace_id"]][0]
        print("example:")
        print(f"  probe  {parent['name']!r} kind {parent['kind']} trace {parent['trace_id']} span {parent['span_id']}")
        print(f"  server {example['name']!r} kind {example['kind']} parent {example['parent_span_id']}")
        keys = sorted(k for k in example["attributes"] if k.startswith("gen_ai."))
        print("  server attributes: " + ", ".join(keys))
    print(f"probe TTFT:             {quantiles(probe_ttft)}")
    print(f"vLLM TTFT:              {quantiles(server_ttft)}")
    print(f"  of which queue:       {quantiles(queue)}")
    print(f"  of which prefill:     {quantiles(prefill)}")
    print(f"outside the engine:     {quantiles(outside)}")
    print(f"vLLM decode:            {quantiles(decode)}")
    if tpot_pairs:
        diffs = [abs(p - v) for p, v in tpot_pairs]
        print(f"TPOT per request, probe: {quantiles([p for p, _ in tpot_pairs])}")
        print(f"TPOT per request, vLLM:  {quantiles([v for _, v in tpot_pairs])}")
        print(f"|probe - vLLM| TPOT per request: {quantiles(diffs)}, ratio of means "
              f"{statistics.mean(p for p, _ in tpot_pairs) / statistics.mean(v for _, v in tpot_pairs):.3f}")
    if args.vllm_metrics and args.inferprobe_metrics:
        compare_histograms(open(args.inferprobe_metrics).read(), open(args.vllm_metrics).read())
    if failures:
        print("FAILED:")
        for f in failures[:20]:
            print("  " + f)
        sys.exit(1)
    print("PASS: every vLLM span is a child of the probe span that sent its traceparent")


if __name__ == "__main__":
    main()
