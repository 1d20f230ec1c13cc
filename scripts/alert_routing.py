#!/usr/bin/env python3
"""The working parts of scripts/alert-routing-proof.sh (read its header first).

    alert_routing.py merge  BASE AMCONFIG... --out FILE [--am-namespace NS] [--strategy S]
    alert_routing.py cases  PROMETHEUSRULE --tests GLOB --out FILE
    alert_routing.py route  CONFIG CASES --mode contract|control --team RECEIVER --out FILE
    alert_routing.py live   CONFIG ROUTED --team RECEIVER --alertmanager BIN --workdir DIR --out FILE
    alert_routing.py table  ROUTED [--live FILE] [--control FILE] [--chart FILE]

Needs python3 and PyYAML. `merge` converts AlertmanagerConfig objects the way the Prometheus
Operator does; the functions it follows are named in comments, from
  https://github.com/prometheus-operator/prometheus-operator
  pkg/alertmanager/amcfg.go at 6adcebc5076c34f4f55f8f5f7b1e528929373ac7 (v0.93.0).
"""

import argparse
import glob
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import yaml

SHIPPED = ("critical", "warning", "info")


def die(msg):
    sys.exit(f"alert-routing-proof: {msg}")


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def dump(path, data):
    with open(path, "w", encoding="utf-8") as f:
        if path.endswith(".json"):
            json.dump(data, f, indent=1, sort_keys=True)
        else:
            yaml.safe_dump(data, f, sort_keys=False, default_flow_style=False)


# --- merge: the Prometheus Operator's conversion ------------------------------------------


def escape(value):
    # openMetricsEscape (pkg/apis/monitoring/v1alpha1/alertmanager_config_types.go)
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def matcher_string(name, match_type, value):
    # Matcher.String(): fmt.Sprintf(`%s%s"%s"`, name, matchType, openMetricsEscape(value))
    return f'{name}{match_type}"{escape(value)}"'


def namespaced(name, ns, cr):
    # makeNamespacedString: namespace + "/" + name + "/" + in ("" stays "")
    return f"{ns}/{cr}/{name}" if name else ""


def convert_matchers(ms):
    # convertMatchersV2 with matchersV2Allowed (Alertmanager >= 0.22; kps runs v0.34.0):
    # matchType set -> Matcher.String(); else regex -> "=~", plain -> "=" (inhibitRule*ToV2)
    out = []
    for m in ms or []:
        if m.get("matchType"):
            out.append(matcher_string(m["name"], m["matchType"], m.get("value", "")))
        else:
            out.append(matcher_string(m["name"], "=~" if m.get("regex") else "=", m.get("value", "")))
    return out


ROUTE_KEYS = {"receiver", "groupBy", "groupWait", "groupInterval", "repeatInterval", "continue",
              "matchers", "routes", "muteTimeIntervals", "activeTimeIntervals"}


def convert_route(r, ns, cr):
    # convertRoute: receiver and time intervals prefixed, matchers converted, children recursed
    unknown = set(r) - ROUTE_KEYS
    if unknown:
        die(f"AlertmanagerConfig {ns}/{cr}: route keys {sorted(unknown)} are not converted here")
    out = {}
    if r.get("receiver"):
        out["receiver"] = namespaced(r["receiver"], ns, cr)
    if r.get("groupBy"):
        out["group_by"] = list(r["groupBy"])
    matchers = convert_matchers(r.get("matchers"))
    if matchers:
        out["matchers"] = matchers
    if r.get("continue"):
        out["continue"] = True
    if r.get("routes"):
        out["routes"] = [convert_route(c, ns, cr) for c in r["routes"]]
    for src, dst in (("groupWait", "group_wait"), ("groupInterval", "group_interval"),
                     ("repeatInterval", "repeat_interval")):
        if r.get(src):
            out[dst] = r[src]
    for src, dst in (("muteTimeIntervals", "mute_time_intervals"),
                     ("activeTimeIntervals", "active_time_intervals")):
        if r.get(src):
            out[dst] = [namespaced(t, ns, cr) for t in r[src]]
    return out


def convert_receiver(rcv, ns, cr):
    # convertReceiver: Name = makeNamespacedString(in.Name, crKey); convertWebhookConfig:
    # url, send_resolved, max_alerts (only webhooks are converted by this proof)
    unknown = set(rcv) - {"name", "webhookConfigs"}
    if unknown:
        die(f"AlertmanagerConfig {ns}/{cr}: receiver {rcv.get('name')}: only webhookConfigs "
            f"are converted here, not {sorted(unknown)}")
    out = {"name": namespaced(rcv["name"], ns, cr)}
    hooks = []
    for w in rcv.get("webhookConfigs") or []:
        h = {}
        if "sendResolved" in w:
            h["send_resolved"] = bool(w["sendResolved"])
        if not w.get("url"):
            die(f"AlertmanagerConfig {ns}/{cr}: webhook without a literal url (urlSecret needs a cluster)")
        h["url"] = w["url"]
        if w.get("maxAlerts", 0) > 0:
            h["max_alerts"] = w["maxAlerts"]
        hooks.append(h)
    if hooks:
        out["webhook_configs"] = hooks
    return out


def cmd_merge(a):
    base = load_yaml(a.base)
    root = base.get("route")
    # checkAlertmanagerConfigRootRoute (InitializeFromRawConfiguration -> alertmanagerConfigFromBytes)
    if not root or root.get("continue") or not root.get("receiver") or \
            root.get("matchers") or root.get("match") or root.get("match_re"):
        die(f"{a.base}: not a valid root route for the Operator")
    crs = {}
    for path in a.amconfig:
        doc = load_yaml(path)
        if doc.get("apiVersion") != "monitoring.coreos.com/v1alpha1" or doc.get("kind") != "AlertmanagerConfig":
            die(f"{path}: not a monitoring.coreos.com/v1alpha1 AlertmanagerConfig")
        md = doc["metadata"]
        crs[f"{md['namespace']}/{md['name']}"] = doc  # MetaNamespaceKey
    sub_routes = []
    for key in sorted(crs):  # AddAlertmanagerConfigs: sortutil.SortedKeys(amConfigs)
        doc = crs[key]
        ns, cr = doc["metadata"]["namespace"], doc["metadata"]["name"]
        spec = doc.get("spec") or {}
        if spec.get("inhibitRules") or spec.get("muteTimeIntervals"):
            die(f"{key}: inhibitRules and muteTimeIntervals are not converted here")
        if not spec.get("route"):
            continue  # "Skip early if there's no route definition."
        names = {r["name"] for r in spec.get("receivers") or []}

        def check(r):
            if r.get("receiver") and r["receiver"] not in names:
                die(f"{key}: route receiver {r['receiver']!r} is not in spec.receivers")
            for c in r.get("routes") or []:
                check(c)
        check(spec["route"])
        route = convert_route(spec["route"], ns, cr)
        # getEnforcer: type None -> noopEnforcer; OnNamespaceExceptForAlertmanagerNamespace ->
        # otherNamespaceEnforcer; anything else (OnNamespace, the default, and kps's unset
        # {}) -> namespaceEnforcer, whose processRoute appends `namespace="<cr namespace>"`
        # to the top route's matchers. Always wrapped in continueToNextRoute: continue: true.
        if a.strategy == "None" or (a.strategy == "OnNamespaceExceptForAlertmanagerNamespace"
                                    and ns == a.am_namespace):
            pass
        else:
            route["matchers"] = route.get("matchers", []) + [matcher_string("namespace", "=", ns)]
        route["continue"] = True
        sub_routes.append(route)
        base.setdefault("receivers", []).extend(
            convert_receiver(r, ns, cr) for r in spec.get("receivers") or [])
    # "For alerts to be processed by the AlertmanagerConfig routes, they need to appear before
    # the routes defined in the main configuration": cb.cfg.Route.Routes = append(subRoutes, ...)
    root["routes"] = sub_routes + (root.get("routes") or [])
    dump(a.out, base)


# --- cases: each alert's firing label sets ------------------------------------------------

def literal(alert, key, value):
    """A rule label's value, which must be literal text: Prometheus expands rule labels as Go
    templates, and one that expands to nothing reaches ALERTS as the raw template text. The
    contract's labels are static (a discovered replica's namespace is the annotation
    replica_namespace, not a label), so a firing label set is the series' labels with them."""
    value = str(value)
    if "{{" in value:
        die(f"{alert}: label {key}={value!r} is a template: the contract's alert labels are "
            "literal (the series' namespace is the annotation replica_namespace)")
    return value


def cmd_cases(a):
    rule_doc = load_yaml(a.rule)
    rules = {}
    for g in rule_doc["spec"]["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                rules[r["alert"]] = r.get("labels") or {}
    source = {}  # the source rules' labels: taken off exp_labels to get the series' labels
    tested = {}
    for path in sorted(glob.glob(a.tests)):
        t = load_yaml(path)
        for rf in t.get("rule_files") or []:
            rp = os.path.normpath(os.path.join(os.path.dirname(path), rf))
            for g in (load_yaml(rp) or {}).get("groups") or []:
                for r in g["rules"]:
                    if "alert" in r:
                        source[r["alert"]] = r.get("labels") or {}
        for test in t.get("tests") or []:
            for art in test.get("alert_rule_test") or []:
                for e in art.get("exp_alerts") or []:
                    labels = {k: str(v) for k, v in (e.get("exp_labels") or {}).items()}
                    tested.setdefault(art["alertname"], []).append((os.path.basename(path), labels))
    missing = sorted(set(rules) - set(tested))
    if missing:
        die("no firing case in config/prometheus/tests/*.test.yml for " + ", ".join(missing)
            + ": add an exp_alerts case, so the proof knows the labels it fires with")
    unknown = sorted(set(tested) - set(rules))
    if unknown:
        die(f"{a.rule}: no alert {', '.join(unknown)} (the tests fire it)")
    cases = []
    for name in rules:  # rule order
        seen = set()
        for test_file, exp in tested[name]:
            series = {k: v for k, v in exp.items() if k not in source.get(name, {})}
            labels = dict(series)
            for k, v in rules[name].items():
                labels[k] = literal(name, k, v)
            labels = {k: v for k, v in labels.items() if v != ""}  # an empty label is none
            labels["alertname"] = name
            key = tuple(sorted(labels.items()))
            if key in seen:
                continue
            seen.add(key)
            cases.append({"alert": name, "test": test_file, "labels": labels})
    dump(a.out, cases)


# --- route: amtool config routes test -----------------------------------------------------


def amtool_route(config, labels):
    args = ["amtool", "config", "routes", "test", f"--config.file={config}"]
    args += [f'{k}="{escape(v)}"' for k, v in sorted(labels.items())]
    p = subprocess.run(args, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        die(f"amtool failed ({p.returncode}): {' '.join(args)}\n{p.stderr}")
    out = p.stdout.strip().splitlines()
    return out[-1].split(",") if out else []


def cmd_route(a):
    cases = load_yaml(a.cases)
    failures = []
    for c in cases:
        c["receivers"] = amtool_route(a.config, c["labels"])
        sev = c["labels"].get("severity", "")
        if a.mode == "contract":
            if sev not in SHIPPED:
                failures.append(f"{c['alert']}: severity {sev!r} is not one of {SHIPPED}")
            elif sev in ("critical", "warning") and c["receivers"] != [a.team]:
                failures.append(f"{c['alert']} ({sev}) {c['labels']} -> {c['receivers']}, not {a.team}")
            elif sev == "info" and c["receivers"] not in ([a.team], ["null"]):
                failures.append(f"{c['alert']} (info) -> {c['receivers']}")
        else:  # the old contract must lose the pages
            if sev == "page" and c["receivers"] != ["null"]:
                failures.append(f"{c['alert']} (page) reached {c['receivers']}: the control did not fail")
    dump(a.out, cases)
    if a.mode == "control":
        pages = [c for c in cases if c["labels"].get("severity") == "page"]
        if not pages:
            failures.append("control: no alert has severity page (was --severity critical=page applied?)")
    if failures:
        die(f"{a.mode}: " + "\n  ".join([""] + failures))


# --- live: a real Alertmanager, a webhook, the alerts posted --------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fp(labels):
    return tuple(sorted(labels.items()))


def recorder(on_body):
    """A webhook receiver on 127.0.0.1 calling on_body(notification) for each POST: (server,
    url)."""
    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            on_body(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    return hook, f"http://127.0.0.1:{hook.server_address[1]}/"


def start_alertmanager(binary, cfg, hook_url, workdir):
    """A real Alertmanager (127.0.0.1, a free port, clustering off) running the configuration
    cfg with every webhook pointed at hook_url, ready: (process, base URL)."""
    for rcv in cfg.get("receivers") or []:
        for w in rcv.get("webhook_configs") or []:
            w["url"] = hook_url
    cfg.pop("templates", None)  # /etc/alertmanager/config/*.tmpl: none exist here
    os.makedirs(workdir, exist_ok=True)
    test_cfg = os.path.join(workdir, "alertmanager-live.yml")
    dump(test_cfg, cfg)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(workdir, "alertmanager.log"), "w")
    am = subprocess.Popen(
        [binary, f"--config.file={test_cfg}", f"--storage.path={workdir}/am-data",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    while True:
        try:
            urllib.request.urlopen(base + "/-/ready", timeout=2).read()
            return am, base
        except Exception:
            if am.poll() is not None or time.time() > deadline:
                am.kill()
                log.flush()
                die("alertmanager did not start:\n" + open(log.name).read()[-2000:])
            time.sleep(0.2)


def stop(am, hook):
    am.terminate()
    try:
        am.wait(timeout=5)
    except subprocess.TimeoutExpired:
        am.kill()
        am.wait()
    hook.shutdown()


def cmd_live(a):
    cases = load_yaml(a.routed)
    deliveries = []  # (receiver, labels) per delivered alert
    lock = threading.Lock()

    def on_body(body):
        with lock:
            for al in body.get("alerts", []):
                deliveries.append((body.get("receiver"), fp(al["labels"]), al["status"]))

    hook, hook_url = recorder(on_body)

    # The test copy: every webhook points at the recorder, and group_wait/group_interval are
    # 1s wherever set (kps's 30s/5m would outlast the run). Routing and inhibition unchanged.
    cfg = load_yaml(a.config)

    def quick(r, root=False):
        if root or "group_wait" in r or "group_interval" in r:
            r["group_wait"], r["group_interval"] = "1s", "1s"
        for c in r.get("routes") or []:
            quick(c)
    quick(cfg["route"], root=True)
    am, base = start_alertmanager(a.alertmanager, cfg, hook_url, a.workdir)
    print(f"alertmanager {a.alertmanager} on {base}, webhook {hook_url} (pid {am.pid})", flush=True)

    def api(path, data=None):
        req = urllib.request.Request(base + path, method="POST" if data is not None else "GET",
                                     data=None if data is None else json.dumps(data).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            body = r.read()
            return json.loads(body) if path.startswith("/api/") and body else body

    def post(cs):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
        api("/api/v2/alerts", [{"labels": c["labels"], "startsAt": now,
                                "annotations": {"summary": c["alert"]}} for c in cs])

    def wait_for(want, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            with lock:
                got = {f for (_, f, _) in deliveries}
            if want <= got:
                return True
            time.sleep(0.2)
        return False

    failures = []
    try:
        paged = [c for c in cases if c["labels"].get("severity") in ("critical", "warning")]
        # 1. A lone critical alert: delivered to the team's webhook, not inhibited.
        lone = next(c for c in paged if c["labels"]["severity"] == "critical")
        t0 = time.time()
        post([lone])
        if not wait_for({fp(lone["labels"])}, 15):
            failures.append(f"lone critical {lone['alert']} was not delivered within 15 s")
        else:
            print(f"lone critical {lone['alert']}: delivered to "
                  f"{[r for (r, f, _) in deliveries if f == fp(lone['labels'])][0]} "
                  f"{time.time() - t0:.1f} s after posting", flush=True)
        # 2. Every alert at once (criticals beside warnings: what the inhibit rules see).
        post(cases)
        want = {fp(c["labels"]) for c in paged}
        wait_for(want, 20)
        status = {fp(al["labels"]): al["status"] for al in api("/api/v2/alerts")}
        with lock:
            got = {}
            for r, f, st in deliveries:
                got.setdefault(f, set()).add(r)
        live = []
        for c in cases:
            f = fp(c["labels"])
            st = status.get(f, {})
            rec = sorted(got.get(f, []))
            c["live"] = {"delivered": rec, "state": st.get("state"),
                         "inhibitedBy": st.get("inhibitedBy") or []}
            live.append(c)
            if c in paged and (rec != [a.team] or st.get("inhibitedBy")):
                failures.append(f"{c['alert']} {c['labels']}: delivered to {rec}, state "
                                f"{st.get('state')}, inhibitedBy {st.get('inhibitedBy')}")
        dump(a.out, live)
        n = sum(1 for c in paged if c["live"]["delivered"] == [a.team])
        print(f"live: {n}/{len(paged)} critical and warning firing label sets delivered to "
              f"{a.team}; {sum(1 for c in live if c['live']['inhibitedBy'])} inhibited", flush=True)
    finally:
        stop(am, hook)
    if failures:
        die("live Alertmanager:\n  " + "\n  ".join(failures))


# --- table --------------------------------------------------------------------------------


def summarize(cases, key="receivers"):
    by = {}
    for c in cases:
        r = by.setdefault(c["alert"], {"severity": c["labels"].get("severity", ""), "recv": set(), "n": 0})
        r["n"] += 1
        val = c[key] if key == "receivers" else c["live"]["delivered"] or ["(none)"]
        r["recv"].add(",".join(val))
    return by


def cmd_table(a):
    main = summarize(load_yaml(a.routed))
    live = summarize(load_yaml(a.live), "live") if a.live else {}
    ctl = summarize(load_yaml(a.control)) if a.control else {}
    chart = summarize(load_yaml(a.chart)) if a.chart else {}
    head = ["alert", "severity", "sets", "receiver (amtool)"]
    if live:
        head.append("delivered (live)")
    if chart:
        head.append("chart")
    if ctl:
        head.append("old contract")
    rows = []
    for name, r in main.items():
        row = [name, r["severity"], str(r["n"]), " ".join(sorted(r["recv"]))]
        if live:
            row.append(" ".join(sorted(live[name]["recv"])))
        if chart:
            row.append(" ".join(sorted(chart[name]["recv"])) if name in chart else "-")
        if ctl:
            c = ctl.get(name)
            row.append(f"{c['severity']} -> {' '.join(sorted(c['recv']))}" if c else "-")
        rows.append(row)
    w = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(c.ljust(n) for c, n in zip(cells, w)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (n + 2) for n in w) + "|")
    for row in rows:
        print(line(row))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge")
    m.add_argument("base")
    m.add_argument("amconfig", nargs="+")
    m.add_argument("--out", required=True)
    m.add_argument("--am-namespace", default="monitoring")
    m.add_argument("--strategy", default="OnNamespace",
                   choices=["OnNamespace", "OnNamespaceExceptForAlertmanagerNamespace", "None"])
    c = sub.add_parser("cases")
    c.add_argument("rule")
    c.add_argument("--tests", required=True)
    c.add_argument("--out", required=True)
    r = sub.add_parser("route")
    r.add_argument("config")
    r.add_argument("cases")
    r.add_argument("--mode", choices=["contract", "control"], required=True)
    r.add_argument("--team", required=True)
    r.add_argument("--out", required=True)
    lv = sub.add_parser("live")
    lv.add_argument("config")
    lv.add_argument("routed")
    lv.add_argument("--team", required=True)
    lv.add_argument("--alertmanager", required=True)
    lv.add_argument("--workdir", required=True)
    lv.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("routed")
    t.add_argument("--live")
    t.add_argument("--control")
    t.add_argument("--chart")
    a = p.parse_args()
    {"merge": cmd_merge, "cases": cmd_cases, "route": cmd_route, "live": cmd_live,
     "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
