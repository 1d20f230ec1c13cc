#!/usr/bin/env python3
"""How long a page waits in Alertmanager, at a configuration's real timings (docs/alerts.md,
"Delivery"): a real Alertmanager (Debian's) runs CONFIG as it is, but for its webhooks, which
point at a local recorder. Another inferprobe alert of the same namespace fires first (the
fast budget burn of target vllm, as in an outage) and is delivered; then InferprobeTargetDown
of the same target is posted and the time until its notification arrives is measured.

Under kube-prometheus-stack's root route (group_by [namespace], group_interval 5m) with an
AlertmanagerConfig that sets no groupBy of its own, the page joins the open group and waits for
its next flush, up to five minutes; under the chart's AlertmanagerConfig (groupBy alertname,
cluster, target; critical groupWait 10s) it is a group of its own, sent after its groupWait.

    alert_delivery.py CONFIG --alertmanager BIN --workdir DIR --wait SECONDS --out JSON

Prints and writes {"opener_s": ..., "page_s": ... or null (not delivered within --wait)}.
Everything on 127.0.0.1, bounded by --wait, stopped on exit.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alert_routing import die, dump, load_yaml, recorder, start_alertmanager, stop  # noqa: E402

NAMESPACE = "inferprobe"
OPENER = {"alertname": "InferprobeErrorBudgetBurnFast", "severity": "critical",
          "namespace": NAMESPACE, "cluster": "east", "target": "vllm", "slo": "availability"}
PAGE = {"alertname": "InferprobeTargetDown", "severity": "critical", "namespace": NAMESPACE,
        "cluster": "east", "target": "vllm"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--alertmanager", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--wait", type=float, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    seen = {}  # alertname -> when it was first delivered (time.time())
    lock = threading.Lock()

    def on_body(body):
        with lock:
            for al in body.get("alerts", []):
                seen.setdefault(al["labels"].get("alertname"), time.time())

    hook, hook_url = recorder(on_body)
    am, base = start_alertmanager(a.alertmanager, load_yaml(a.config), hook_url, a.workdir)

    def post(labels):
        # startsAt now and no endsAt: Alertmanager holds it for resolve_timeout (kps: 5m), as it
        # does between Prometheus's resends.
        data = json.dumps([{"labels": labels, "annotations": {"summary": labels["alertname"]}}])
        req = urllib.request.Request(base + "/api/v2/alerts", data=data.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()

    def delivered(name, since, seconds):
        deadline = since + seconds
        while time.time() < deadline:
            with lock:
                if name in seen:
                    return seen[name] - since
            time.sleep(0.1)
        return None

    try:
        t0 = time.time()
        post(OPENER)
        opener = delivered(OPENER["alertname"], t0, 90)
        if opener is None:
            die("the opening alert was not delivered within 90 s: the route does not take it")
        t1 = time.time()
        post(PAGE)
        page = delivered(PAGE["alertname"], t1, a.wait)
        out = {"opener_s": round(opener, 1), "page_s": None if page is None else round(page, 1),
               "waited_s": a.wait}
        dump(a.out, out)
        print(json.dumps(out), flush=True)
    finally:
        stop(am, hook)


if __name__ == "__main__":
    main()
