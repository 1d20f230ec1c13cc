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
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alert_routing import die, dump, free_port, load_yaml  # noqa: E402

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

    seen = {}  # alertname -> seconds since start when first delivered
    lock = threading.Lock()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                for al in body.get("alerts", []):
                    seen.setdefault(al["labels"].get("alertname"), time.time())
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    cfg = load_yaml(a.config)
    for rcv in cfg.get("receivers") or []:
        for w in rcv.get("webhook_configs") or []:
            w["url"] = f"http://127.0.0.1:{hook.server_address[1]}/"
    cfg.pop("templates", None)
    os.makedirs(a.workdir, exist_ok=True)
    test_cfg = os.path.join(a.workdir, "alertmanager.yml")
    dump(test_cfg, cfg)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(a.workdir, "alertmanager.log"), "w")
    am = subprocess.Popen(
        [a.alertmanager, f"--config.file={test_cfg}", f"--storage.path={a.workdir}/data",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

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
        deadline = time.time() + 15
        while True:
            try:
                urllib.request.urlopen(base + "/-/ready", timeout=2).read()
                break
            except Exception:
                if am.poll() is not None or time.time() > deadline:
                    log.flush()
                    die("alertmanager did not start:\n" + open(log.name).read()[-2000:])
                time.sleep(0.2)
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
        am.terminate()
        try:
            am.wait(timeout=5)
        except subprocess.TimeoutExpired:
            am.kill()
            am.wait()
        hook.shutdown()


if __name__ == "__main__":
    main()
