#!/usr/bin/env python3
"""Pair inferprobe's probe spans with vLLM's `llm_request` spans and check the parentage.

Reads the receiver's span lines (otlp_receiver.py). Checks, and prints a report:
  - every probe inferprobe counted has one span (requests_total = spans);
  - every vLLM `llm_request` span shares its trace id with one probe span and names that
    span as its parent (the server continued the probe's `traceparent`);
  - every successful probe has a vLLM child;
  - the child lies inside the parent in time (same machine, same clock);
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spans")
    ap.add_argument("--inferprobe-metrics")
    ap.add_argument("--vllm-version", default="?")
    ap.add_argument("--protocol", default="?")
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
    print(f"vLLM {args.vllm_version}; inferprobe exported over {args.protocol}")
    print(f"probe spans: {len(probes)} (kind {sorted({p['kind'] for p in probes})}), "
          f"inferprobe requests_total at the scrape: {requests}")
    print(f"vLLM llm_request spans: {len(server)} (kind {sorted({s['kind'] for s in server})})")
    if requests is not None and len(probes) < requests:
        failures.append(f"{requests - len(probes):.0f} probes counted without a span")
    if not probes or not server:
        failures.append("no spans to pair")

    children = 0
    ok_probes = [p for p in probes if "error.type" not in p["attributes"]]
    with_child = set()
    outside, queue, prefill, server_ttft, probe_ttft, decode = [], [], [], [], [], []
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
        t = pa.get("gen_ai.response.time_to_first_chunk")
        st = a.get("gen_ai.latency.time_to_first_token")
        if t is not None and st is not None:
            probe_ttft.append(t)
            server_ttft.append(st)
            outside.append(t - st)
        queue.append(a.get("gen_ai.latency.time_in_queue", 0.0))
        prefill.append(a.get("gen_ai.latency.time_in_model_prefill", 0.0))
        decode.append(a.get("gen_ai.latency.time_in_model_decode", 0.0))
    orphans = [p for p in ok_probes if p["span_id"] not in with_child]
    print(f"llm_request spans whose parent is the probe's span: {children} of {len(server)}")
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
    if failures:
        print("FAILED:")
        for f in failures[:20]:
            print("  " + f)
        sys.exit(1)
    print("PASS: every vLLM span is a child of the probe span that sent its traceparent")


if __name__ == "__main__":
    main()
