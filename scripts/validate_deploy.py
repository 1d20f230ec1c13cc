"""Checks for scripts/validate-deploy.sh that no schema validator knows (run in its venv, which
has PyYAML). One subcommand per step; each exits non-zero naming what is wrong.

  kustomization DIR               kustomization.yaml well-formed, files present and listed
  component DIR                   a Kustomize Component (namespaced/): the same, for it
  overlay OUT BASE [COMPONENT]    a kustomization in OUT using BASE (and COMPONENT), for kubectl
  render DIR [COMPONENT]          the base (with COMPONENT) rendered without kustomize (stdout)
  split RENDERED CORE CRDS        core kinds and monitoring.coreos.com kinds in two files
  objects RENDERED SECRET [CLUSTER|NAMESPACED]
                                  PodMonitor, PrometheusRule, labels, selectors, DaemonSet,
                                  RBAC (cluster-wide or namespaced) against the config
  rbac-covers RENDERED CONFIG...  the RBAC of RENDERED lets each CONFIG's discovery read
  rules-match RULE FILES...       the PrometheusRule's groups are exactly the files' groups
  rules-file RULE                 the PrometheusRule's groups as a Prometheus rule file
  config RENDERED SECRETS_DIR     the ConfigMap's config.toml, secret paths moved (stdout)
  dockerfile DOCKERFILE RENDERED  the Dockerfile and the DaemonSet agree
  docker-context DOCKERFILE IGNORE OUT
                                  the build stage's sources, laid out in OUT
"""

import json
import os
import re
import sys
import tomllib

import yaml

LABELS = {
    "app.kubernetes.io/name": "inferprobe",
    "app.kubernetes.io/instance": "inferprobe",
}
NAMESPACE = "inferprobe"
# The directory the configuration's volume is mounted at (no subPath: the kubelet updates a
# directory mount in place, so a reload reads a changed ConfigMap), and the file in it the
# image's ENTRYPOINT reads, the ConfigMap's key.
CONFIG_DIR = "/etc/inferprobe/config"
CONFIG_KEY = "config.toml"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_KEY}"
SECRETS_DIR = "/etc/inferprobe/secrets"
SECRET_NAME = "inferprobe-api-keys"
PORT_NAME = "metrics"
CORE_KINDS = {"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Service", "Secret",
              "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
RBAC_GROUP = "rbac.authorization.k8s.io"
# What discovery may do: read, and only the kinds it watches.
READ_VERBS = {"get", "list", "watch"}
NEEDED_VERBS = {"list", "watch"}  # kube-runtime's watcher: list, then watch
RBAC_RESOURCES = {("", "pods"), ("discovery.k8s.io", "endpointslices"),
                  ("inference.networking.k8s.io", "inferencepools"),
                  ("inference.networking.x-k8s.io", "inferencepools")}
POOL_GROUPS = {"v1": "inference.networking.k8s.io", "v1alpha2": "inference.networking.x-k8s.io"}
# Labels that name the replica on a discovered target's series: the probe's own pod and
# namespace must not take these names (labels_from_env, Prometheus's target labels).
REPLICA_LABELS = ("pod", "namespace")
CRD_GROUP = "monitoring.coreos.com/"
# Keys of a Kustomization this base may use; anything else is a typo or needs review.
KUSTOMIZATION_KEYS = {
    "apiVersion", "kind", "namespace", "resources", "configMapGenerator", "secretGenerator",
    "generatorOptions", "labels", "commonAnnotations", "images", "patches", "components",
}
NOT_LISTED = {"kustomization.yaml", "secret.example.yaml"}

errors = []


def error(msg):
    errors.append(msg)


def done(ok_msg):
    if errors:
        for e in errors:
            print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print(ok_msg)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def name_of(obj):
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


# ---- kustomization ----------------------------------------------------------------------

def load_kustomization(k8s):
    path = os.path.join(k8s, "kustomization.yaml")
    docs = load_all(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        sys.exit(f"FAIL: {path}: expected one YAML mapping")
    return path, docs[0]


def cmd_kustomization(k8s):
    path, k = load_kustomization(k8s)
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        error(f"{path}: apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization")
    unknown = set(k) - KUSTOMIZATION_KEYS
    if unknown:
        error(f"{path}: unexpected keys {sorted(unknown)}")
    if k.get("namespace") != NAMESPACE:
        error(f"{path}: namespace must be {NAMESPACE}")
    resources = k.get("resources")
    if not isinstance(resources, list) or not resources:
        error(f"{path}: resources must be a non-empty list")
        resources = []
    if len(set(resources)) != len(resources):
        error(f"{path}: a resource is listed twice")
    for r in resources:
        f = os.path.join(k8s, r)
        if not os.path.isfile(f):
            error(f"{path}: resource {r} does not exist")
            continue
        try:
            docs = load_all(f)
        except yaml.YAMLError as e:
            error(f"{f}: not YAML: {e}")
            continue
        if len(docs) != 1:
            error(f"{f}: one object per file expected, found {len(docs)}")
        for d in docs:
            if not isinstance(d, dict) or not d.get("apiVersion") or not d.get("kind"):
                error(f"{f}: not a Kubernetes object (apiVersion and kind)")
    for g in k.get("configMapGenerator") or []:
        if not g.get("name"):
            error(f"{path}: configMapGenerator entry without a name")
        for spec in g.get("files") or []:
            src = spec.split("=", 1)[-1]
            if not os.path.isfile(os.path.join(k8s, src)):
                error(f"{path}: configMapGenerator {g.get('name')}: file {src} does not exist")
    # Every manifest in the directory must be listed, except the example Secret.
    for f in sorted(os.listdir(k8s)):
        if f.endswith((".yaml", ".yml")) and f not in NOT_LISTED and f not in resources:
            error(f"{path}: {f} is in {k8s} but not listed in resources")
    for f in NOT_LISTED - {"kustomization.yaml"}:
        if f in resources:
            error(f"{path}: {f} must not be listed (an example, never deployed)")
        if not os.path.isfile(os.path.join(k8s, f)):
            error(f"{k8s}/{f} is missing")
    done(f"{path}: {len(resources)} resources, "
         f"{len(k.get('configMapGenerator') or [])} generated ConfigMap(s)")


def delete_patches(path, k):
    """The objects a kustomization's `$patch: delete` patches remove: (apiVersion, kind,
    name). Other patches are not understood by the Python rendering."""
    out = []
    for i, p in enumerate(k.get("patches") or []):
        body = yaml.safe_load(p.get("patch", "")) if isinstance(p, dict) else None
        if not isinstance(body, dict) or body.get("$patch") != "delete" or p.get("path"):
            error(f"{path}: patches[{i}]: only inline `$patch: delete` patches are used here")
            continue
        out.append((body.get("apiVersion"), body.get("kind"), (body.get("metadata") or {}).get("name")))
    return out


def cmd_component(comp):
    """A Kustomize Component (namespaced/): well-formed, its files present, one object each,
    every manifest listed, and its delete patches name objects of the base above it."""
    path = os.path.join(comp, "kustomization.yaml")
    docs = load_all(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        sys.exit(f"FAIL: {path}: expected one YAML mapping")
    k = docs[0]
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1alpha1" or k.get("kind") != "Component":
        error(f"{path}: apiVersion/kind must be kustomize.config.k8s.io/v1alpha1 Component")
    unknown = set(k) - {"apiVersion", "kind", "resources", "patches"}
    if unknown:
        error(f"{path}: unexpected keys {sorted(unknown)}")
    resources = k.get("resources") or []
    for r in resources:
        f = os.path.join(comp, r)
        if not os.path.isfile(f):
            error(f"{path}: resource {r} does not exist")
            continue
        objs = load_all(f)
        if len(objs) != 1 or not objs[0].get("kind"):
            error(f"{f}: one Kubernetes object per file expected")
    for f in sorted(os.listdir(comp)):
        if f.endswith((".yaml", ".yml")) and f != "kustomization.yaml" and f not in resources:
            error(f"{path}: {f} is in {comp} but not listed in resources")
    base = []
    _, bk = load_kustomization(os.path.dirname(os.path.normpath(comp)))
    for r in bk.get("resources") or []:
        base.extend(load_all(os.path.join(os.path.dirname(os.path.normpath(comp)), r)))
    deletes = delete_patches(path, k)
    for api, kind, name in deletes:
        if not any(o.get("apiVersion") == api and o.get("kind") == kind
                   and o["metadata"].get("name") == name for o in base):
            error(f"{path}: deletes {kind}/{name} ({api}), which the base does not have")
    done(f"{path}: a Component, {len(resources)} resources, deletes "
         f"{', '.join(f'{kind}/{name}' for _, kind, name in deletes) or 'nothing'}")


def cmd_overlay(out, base, component=None):
    """A kustomization in OUT using BASE and COMPONENT, with relative paths (kustomize takes
    no absolute ones), so `kubectl kustomize OUT` renders the base with the component."""
    os.makedirs(out, exist_ok=True)
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
         "resources": [os.path.relpath(base, out)]}
    if component:
        k["components"] = [os.path.relpath(component, out)]
    with open(os.path.join(out, "kustomization.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(k, f, sort_keys=False)


# ---- render (without kustomize) ---------------------------------------------------------

def cmd_render(k8s, component=None):
    """What `kustomize build` makes of this base (and COMPONENT), minus the name hash: the
    listed objects in the kustomization's namespace, the generated ConfigMap, references to
    it; then the component's objects as they are, less what its delete patches remove."""
    _, k = load_kustomization(k8s)
    ns = k.get("namespace")
    objects = []
    for r in k.get("resources") or []:
        objects.extend(load_all(os.path.join(k8s, r)))
    for g in k.get("configMapGenerator") or []:
        data = {}
        for spec in g.get("files") or []:
            key, _, src = spec.rpartition("=")
            src_path = os.path.join(k8s, src)
            with open(src_path, encoding="utf-8") as f:
                data[key or os.path.basename(src)] = f.read()
        meta = {"name": g["name"]}
        labels = (g.get("options") or {}).get("labels") or (k.get("generatorOptions") or {}).get("labels")
        if labels:
            meta["labels"] = labels
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    for o in objects:
        if ns and o.get("kind") not in CLUSTER_SCOPED:
            o.setdefault("metadata", {})["namespace"] = ns
        # `labels` with includeSelectors false: metadata only, as kustomize 4.1+ applies them.
        for entry in k.get("labels") or []:
            if entry.get("includeSelectors") or entry.get("includeTemplates"):
                error("the Python renderer applies `labels` to metadata only")
            o.setdefault("metadata", {}).setdefault("labels", {}).update(entry.get("pairs") or {})
    if component:
        path = os.path.join(component, "kustomization.yaml")
        (c,) = load_all(path)
        for api, kind, name in delete_patches(path, c):
            objects = [o for o in objects if not (o.get("apiVersion") == api and o.get("kind") == kind
                                                  and o["metadata"].get("name") == name)]
        for r in c.get("resources") or []:
            objects.extend(load_all(os.path.join(component, r)))
        if errors:
            done("")
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)


def cmd_split(rendered, core_out, crd_out):
    core, crds = [], []
    for o in load_all(rendered):
        if str(o.get("apiVersion", "")).startswith(CRD_GROUP):
            crds.append(o)
        elif o.get("kind") in CORE_KINDS:
            core.append(o)
        else:
            error(f"{name_of(o)}: kind not expected in this base")
    with open(core_out, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(core, f, sort_keys=False)
    with open(crd_out, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(crds, f, sort_keys=False)
    done(f"{len(core)} core objects ({', '.join(name_of(o) for o in core)}); "
         f"{len(crds)} Prometheus Operator objects")


# ---- objects ----------------------------------------------------------------------------

def is_str_map(m):
    return isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in m.items())


def check_metadata(o, namespaced=True):
    meta = o.get("metadata")
    n = name_of(o)
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        error(f"{n}: metadata.name missing")
        return
    labels = meta.get("labels") or {}
    for k, v in LABELS.items():
        if labels.get(k) != v:
            error(f"{n}: label {k}={v} missing")
    if not namespaced:
        if "namespace" in meta:
            error(f"{n}: a cluster-scoped object has no namespace")
    elif o.get("kind") in ("Role", "RoleBinding"):
        # In the namespace whose objects it grants (checked with the RBAC).
        if not meta.get("namespace"):
            error(f"{n}: namespace missing")
    elif meta.get("namespace") != NAMESPACE:
        error(f"{n}: namespace must be {NAMESPACE}, is {meta.get('namespace')}")


DURATION = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
ALERT_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def check_podmonitor(o, pod_labels, port_names):
    n = name_of(o)
    if o.get("apiVersion") != "monitoring.coreos.com/v1":
        error(f"{n}: apiVersion must be monitoring.coreos.com/v1")
    spec = o.get("spec")
    if not isinstance(spec, dict):
        error(f"{n}: spec missing")
        return
    sel = spec.get("selector")
    if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        error(f"{n}: spec.selector needs matchLabels or matchExpressions")
    elif not is_str_map(sel.get("matchLabels") or {}):
        error(f"{n}: spec.selector.matchLabels must map strings to strings")
    elif not (sel.get("matchLabels") or {}).items() <= pod_labels.items():
        error(f"{n}: spec.selector.matchLabels {sel.get('matchLabels')} does not select the "
              f"DaemonSet's pods {pod_labels}")
    eps = spec.get("podMetricsEndpoints")
    if not isinstance(eps, list) or not eps:
        error(f"{n}: spec.podMetricsEndpoints must be a non-empty list")
        return
    known = {"port", "portNumber", "targetPort", "path", "scheme", "interval", "scrapeTimeout",
             "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings", "params",
             "enableHttp2", "followRedirects", "filterRunning", "trackTimestampsStaleness",
             "proxyUrl", "tlsConfig", "basicAuth", "authorization", "oauth2",
             "bearerTokenSecret"}
    for i, ep in enumerate(eps):
        at = f"{n}: podMetricsEndpoints[{i}]"
        if not isinstance(ep, dict):
            error(f"{at}: not a mapping")
            continue
        if set(ep) - known:
            error(f"{at}: unknown fields {sorted(set(ep) - known)}")
        if not isinstance(ep.get("port"), str) or not ep["port"]:
            error(f"{at}: port (a container port name) required")
        elif ep["port"] not in port_names:
            error(f"{at}: port {ep['port']} is not a container port of the DaemonSet {port_names}")
        for key in ("interval", "scrapeTimeout"):
            if key in ep and not DURATION.match(str(ep[key])):
                error(f"{at}: {key} {ep[key]!r} is not a Prometheus duration")
        if ep.get("interval") != "30s":
            error(f"{at}: interval must be 30s (the recording rules' evaluation interval)")
        if "path" in ep and not str(ep["path"]).startswith("/"):
            error(f"{at}: path must start with /")
        relabelings = ep.get("relabelings") or []
        for j, r in enumerate(relabelings):
            if not isinstance(r, dict):
                error(f"{at}: relabelings[{j}] not a mapping")
            elif "targetLabel" in r and not LABEL_NAME.match(str(r["targetLabel"])):
                error(f"{at}: relabelings[{j}].targetLabel is not a label name")
        check_label_semantics(at, ep, [r for r in relabelings if isinstance(r, dict)])


def check_label_semantics(at, ep, relabelings):
    """`pod` and `namespace` name the replica (a discovered target's own labels, kept by
    honorLabels) or nothing; the probe is `probe_pod` and `node`, set on every series."""
    if ep.get("honorLabels") is not True:
        error(f"{at}: honorLabels must be true: a discovered target's pod, namespace and node "
              "labels (the replica's) would otherwise become exported_*")
    action = lambda r: str(r.get("action") or "replace").lower()
    for label, meta in (("node", "__meta_kubernetes_pod_node_name"),
                        ("probe_pod", "__meta_kubernetes_pod_name")):
        if not any(action(r) == "replace" and r.get("targetLabel") == label
                   and r.get("sourceLabels") == [meta] for r in relabelings):
            error(f"{at}: a relabeling must set {label} from {meta}")
    drops = [r for r in relabelings if action(r) == "labeldrop"]
    for label in REPLICA_LABELS:
        if any(r.get("targetLabel") == label for r in relabelings if action(r) != "labeldrop"):
            error(f"{at}: a relabeling sets `{label}`, which names a discovered replica")
        if not any(re.fullmatch(str(r.get("regex", "")), label) for r in drops):
            error(f"{at}: Prometheus's own `{label}` target label (the probe's) must be dropped "
                  "(action: labeldrop): on a configured target's series it would read as the "
                  "target's")
    for label in ("node", "probe_pod", "target", "model"):
        if any(re.fullmatch(str(r.get("regex", "")), label) for r in drops):
            error(f"{at}: a labeldrop removes `{label}`")


def check_rule_groups(n, groups):
    if not isinstance(groups, list) or not groups:
        error(f"{n}: spec.groups must be a non-empty list")
        return 0
    names, count = set(), 0
    for i, g in enumerate(groups):
        at = f"{n}: groups[{i}]"
        if not isinstance(g, dict):
            error(f"{at}: not a mapping")
            continue
        name = g.get("name")
        if not isinstance(name, str) or not name:
            error(f"{at}: name required")
        elif name in names:
            error(f"{at}: group name {name} used twice")
        names.add(name)
        if "interval" in g and not DURATION.match(str(g["interval"])):
            error(f"{at}: interval {g['interval']!r} is not a Prometheus duration")
        rules = g.get("rules")
        if not isinstance(rules, list) or not rules:
            error(f"{at} ({name}): rules must be a non-empty list")
            continue
        for j, r in enumerate(rules):
            rat = f"{at} ({name}) rules[{j}]"
            count += 1
            if not isinstance(r, dict):
                error(f"{rat}: not a mapping")
                continue
            if ("record" in r) == ("alert" in r):
                error(f"{rat}: exactly one of record or alert")
                continue
            if not isinstance(r.get("expr"), str) or not r["expr"].strip():
                error(f"{rat}: expr must be a non-empty string")
            if "record" in r:
                if not METRIC_NAME.match(str(r["record"])):
                    error(f"{rat}: record {r['record']!r} is not a metric name")
                extra = set(r) - {"record", "expr", "labels"}
                if extra:
                    error(f"{rat}: a recording rule has no {sorted(extra)}")
            else:
                if not ALERT_NAME.match(str(r["alert"])):
                    error(f"{rat}: alert {r['alert']!r} is not a valid alert name")
                extra = set(r) - {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
                if extra:
                    error(f"{rat}: unknown fields {sorted(extra)}")
                for key in ("for", "keep_firing_for"):
                    if key in r and not DURATION.match(str(r[key])):
                        error(f"{rat}: {key} {r[key]!r} is not a Prometheus duration")
                if "annotations" in r and not is_str_map(r["annotations"]):
                    error(f"{rat}: annotations must map strings to strings")
            if "labels" in r:
                if not is_str_map(r["labels"]):
                    error(f"{rat}: labels must map strings to strings")
                elif not all(LABEL_NAME.match(k) for k in r["labels"]):
                    error(f"{rat}: a label name is invalid")
    return count


def check_prometheusrule(o):
    n = name_of(o)
    if o.get("apiVersion") != "monitoring.coreos.com/v1":
        error(f"{n}: apiVersion must be monitoring.coreos.com/v1")
    spec = o.get("spec")
    if not isinstance(spec, dict) or set(spec) - {"groups"}:
        error(f"{n}: spec must hold groups only")
        return 0
    return check_rule_groups(n, spec.get("groups"))


def find(objs, kind):
    found = [o for o in objs if o.get("kind") == kind]
    if len(found) != 1:
        error(f"expected one {kind}, found {len(found)}")
        return None
    return found[0]


def check_daemonset(ds, objs):
    n = name_of(ds)
    spec = ds.get("spec") or {}
    tpl = spec.get("template") or {}
    pod_labels = (tpl.get("metadata") or {}).get("labels") or {}
    pod = tpl.get("spec") or {}
    for k, v in LABELS.items():
        if pod_labels.get(k) != v:
            error(f"{n}: pod template label {k}={v} missing")
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    if sel != LABELS:
        error(f"{n}: spec.selector.matchLabels must be exactly {LABELS} (immutable)")
    if not sel.items() <= pod_labels.items():
        error(f"{n}: selector does not match the pod template labels")
    us = spec.get("updateStrategy") or {}
    if us.get("type") != "RollingUpdate" or (us.get("rollingUpdate") or {}).get("maxUnavailable") != "10%":
        error(f"{n}: updateStrategy must be RollingUpdate with maxUnavailable 10%")
    if not any(t == {"operator": "Exists"} for t in pod.get("tolerations") or []):
        error(f"{n}: a toleration {{operator: Exists}} is needed to run on every node")
    # Discovery reads the API with the ServiceAccount's token: the pod mounts it; the
    # ServiceAccount mounts none by default (only the probe pods opt in).
    if pod.get("automountServiceAccountToken") is not True:
        error(f"{n}: automountServiceAccountToken must be true (discovery reads the Kubernetes API)")
    sa = find(objs, "ServiceAccount")
    if sa is not None:
        if pod.get("serviceAccountName") != sa["metadata"]["name"]:
            error(f"{n}: serviceAccountName is not the ServiceAccount {sa['metadata']['name']}")
        if sa.get("automountServiceAccountToken") is not False:
            error(f"{name_of(sa)}: automountServiceAccountToken must be false (the DaemonSet opts in)")
    psc = pod.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True or (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        error(f"{n}: pod securityContext needs runAsNonRoot and seccompProfile RuntimeDefault")
    containers = pod.get("containers") or []
    if len(containers) != 1:
        error(f"{n}: one container expected")
        return pod_labels, set(), None
    c = containers[0]
    sc = c.get("securityContext") or {}
    want = {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
    }
    for k, v in want.items():
        got = sc.get(k, psc.get(k))
        if got != v:
            error(f"{n}: container securityContext.{k} must be {v}, is {got}")
    if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
        error(f"{n}: capabilities must drop ALL")
    if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        error(f"{n}: seccompProfile must be RuntimeDefault")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    if ports.get(PORT_NAME) != 9464:
        error(f"{n}: container port {PORT_NAME} must be 9464")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != path or get.get("port") not in (PORT_NAME, 9464):
            error(f"{n}: {probe} must GET {path} on port {PORT_NAME}")
    res = c.get("resources") or {}
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in (res.get(kind) or {}):
                error(f"{n}: resources.{kind}.{r} missing")
    env = {e.get("name"): e for e in c.get("env") or []}
    for var, field in (("NODE_NAME", "spec.nodeName"), ("POD_NAME", "metadata.name"),
                       ("POD_NAMESPACE", "metadata.namespace")):
        got = ((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
        if got != field:
            error(f"{n}: env {var} must come from fieldRef {field}")
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts = {m.get("mountPath"): m for m in c.get("volumeMounts") or []}
    cm_mount = mounts.get(CONFIG_DIR)
    config_text = None
    if not cm_mount:
        error(f"{n}: nothing mounted at {CONFIG_DIR}")
    elif cm_mount.get("subPath"):
        error(f"{n}: the configuration is mounted with subPath, which the kubelet never "
              f"updates: a reload would read the old file")
    else:
        cm_ref = (volumes.get(cm_mount.get("name")) or {}).get("configMap") or {}
        cms = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ConfigMap"}
        cm = cms.get(cm_ref.get("name"))
        if cm is None:
            error(f"{n}: the config volume references ConfigMap {cm_ref.get('name')}, which the "
                  f"base does not contain ({sorted(cms)})")
        else:
            config_text = (cm.get("data") or {}).get(CONFIG_KEY)
            if config_text is None:
                error(f"{name_of(cm)}: no key {CONFIG_KEY}")
    sec_mount = mounts.get(SECRETS_DIR)
    if not sec_mount:
        error(f"{n}: nothing mounted at {SECRETS_DIR}")
    else:
        if sec_mount.get("subPath"):
            error(f"{n}: {SECRETS_DIR} must not use subPath (rotations would never arrive)")
        sec = (volumes.get(sec_mount.get("name")) or {}).get("secret") or {}
        if sec.get("secretName") != SECRET_NAME or sec.get("optional") is not True:
            error(f"{n}: {SECRETS_DIR} must be Secret {SECRET_NAME} with optional: true")
    if config_text is not None:
        check_config_fits(n, config_text, pod, c, env, ports, pod_labels)
    return pod_labels, set(ports), config_text


def seconds(d):
    """A humantime-style duration or a number, in seconds."""
    if isinstance(d, (int, float)):
        return float(d)
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total, rest = 0.0, d.replace(" ", "")
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", rest):
        total += float(num) * units[unit]
    return total


def field_of(env, var):
    return (((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")


def check_config_fits(n, text, pod, c, env, ports, pod_labels):
    try:
        cfg = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        error(f"the ConfigMap's config.toml is not TOML: {e}")
        return
    grace = seconds(cfg.get("shutdown_grace", "25s"))
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    if not grace < tgps:
        error(f"{n}: terminationGracePeriodSeconds {tgps} must exceed shutdown_grace {grace}s")
    listen = cfg.get("listen", "0.0.0.0:9464")
    if not listen.startswith("0.0.0.0:") or int(listen.rsplit(":", 1)[1]) != ports.get(PORT_NAME):
        error(f"{n}: config listen {listen} must be 0.0.0.0 on the {PORT_NAME} port")
    from_env = cfg.get("labels_from_env") or {}
    for label, var in from_env.items():
        if var not in env:
            error(f"{n}: labels_from_env.{label} reads {var}, which the container does not set")
    # The probe's own identity: `probe_pod` and `node`; `pod` and `namespace` are the replica's.
    for label in REPLICA_LABELS:
        if label in from_env or label in (cfg.get("labels") or {}):
            error(f"config: `{label}` names the replica on a discovered target's series; label the "
                  f"probe pod with probe_pod instead")
    for label, field in (("probe_pod", "metadata.name"), ("node", "spec.nodeName")):
        if field_of(env, from_env.get(label)) != field:
            error(f"config: labels_from_env.{label} must read an env var from the downward "
                  f"API's {field}")
    kube = cfg.get("kubernetes") or {}
    if "kubeconfig" in kube:
        error("config: kubernetes.kubeconfig is for outside a cluster; in a pod the "
              "ServiceAccount is used")
    node_env = kube.get("node_name_env", "NODE_NAME")
    if any(b.get("node_local") for b in cfg.get("discovery") or []) and field_of(env, node_env) != "spec.nodeName":
        error(f"config: node_local discovery reads {node_env}, which must come from spec.nodeName")
    if "fleet_selector" in kube:
        selected = {}
        for req in str(kube["fleet_selector"]).split(","):
            m = re.fullmatch(r"\s*([^=!\s]+)\s*==?\s*([^,\s]*)\s*", req)
            if m:
                selected[m.group(1)] = m.group(2)
        if not selected or not selected.items() <= pod_labels.items():
            error(f"config: kubernetes.fleet_selector {kube['fleet_selector']!r} does not select "
                  f"the DaemonSet's pods {pod_labels}")
        if "fleet_namespace" not in kube and field_of(env, "POD_NAMESPACE") != "metadata.namespace":
            error("config: kubernetes.fleet_selector looks in $POD_NAMESPACE, which must come "
                  "from metadata.namespace")
    for t in [cfg.get("defaults") or {}] + (cfg.get("targets") or []):
        for key in ("api_key_file", "tls_ca_file", "tls_client_cert_file", "tls_client_key_file"):
            if key in t and not str(t[key]).startswith(SECRETS_DIR + "/"):
                error(f"config {t.get('name', 'defaults')}.{key} {t[key]} is not under {SECRETS_DIR}")


# ---- RBAC -------------------------------------------------------------------------------

def config_needs(cfg, own_namespace, where):
    """What the configuration's discovery reads: (apiGroup, resource, namespace or None for
    every namespace, what needs it)."""
    needs = []
    kube = cfg.get("kubernetes") or {}
    if kube.get("fleet_selector"):
        needs.append(("", "pods", kube.get("fleet_namespace") or own_namespace,
                      f"{where} kubernetes.fleet_selector"))
    for i, b in enumerate(cfg.get("discovery") or []):
        at = f"{where} discovery[{i}] ({b.get('name')}, source {b.get('source')})"
        ns = b.get("namespace")
        source = b.get("source")
        if source == "pods":
            needs.append(("", "pods", ns, at))
        elif source == "endpointslices":
            needs.append(("discovery.k8s.io", "endpointslices", ns, at))
        elif source == "inferencepool":
            group = POOL_GROUPS.get(b.get("pool_version", "v1"))
            needs.append((group, "inferencepools", ns, at))
            needs.append(("", "pods", ns, at))  # the pool's members
    return needs


def rbac_grants(objs, sa_name, sa_namespace):
    """What the bindings grant the ServiceAccount: (namespace or None for every namespace,
    rules, binding). Checks every role and binding on the way: bindings refer to a role that
    exists and to the ServiceAccount, roles are bound, read-only, on discovery's kinds only."""
    roles = {}
    for o in objs:
        if o.get("kind") in ("Role", "ClusterRole"):
            n = name_of(o)
            if o.get("apiVersion") != f"{RBAC_GROUP}/v1":
                error(f"{n}: apiVersion must be {RBAC_GROUP}/v1")
            rules = o.get("rules")
            if not isinstance(rules, list) or not rules:
                error(f"{n}: rules must be a non-empty list")
                rules = []
            for j, r in enumerate(rules):
                verbs = set(r.get("verbs") or [])
                if not verbs or not verbs <= READ_VERBS:
                    error(f"{n}: rules[{j}]: verbs {sorted(verbs)}: discovery only reads "
                          f"({sorted(READ_VERBS)})")
                if r.get("nonResourceURLs"):
                    error(f"{n}: rules[{j}]: nonResourceURLs are not needed")
                for g in r.get("apiGroups") or [None]:
                    for res in r.get("resources") or [None]:
                        if (g, res) not in RBAC_RESOURCES:
                            error(f"{n}: rules[{j}]: {res} in apiGroup {g!r} is not something "
                                  "discovery reads")
            scope = None if o["kind"] == "ClusterRole" else o["metadata"].get("namespace")
            roles[(o["kind"], scope, o["metadata"]["name"])] = (o, rules)
    grants, bound = [], set()
    for o in objs:
        if o.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        n = name_of(o)
        if o.get("apiVersion") != f"{RBAC_GROUP}/v1":
            error(f"{n}: apiVersion must be {RBAC_GROUP}/v1")
        ref = o.get("roleRef") or {}
        kinds = ("ClusterRole",) if o["kind"] == "ClusterRoleBinding" else ("Role", "ClusterRole")
        if ref.get("apiGroup") != RBAC_GROUP or ref.get("kind") not in kinds:
            error(f"{n}: roleRef must be apiGroup {RBAC_GROUP}, kind {' or '.join(kinds)}")
            continue
        ns = o["metadata"].get("namespace") if o["kind"] == "RoleBinding" else None
        key = (ref["kind"], ns if ref["kind"] == "Role" else None, ref.get("name"))
        if key not in roles:
            error(f"{n}: roleRef {ref['kind']}/{ref.get('name')} is not in the rendered objects"
                  + (f" (namespace {ns})" if ref["kind"] == "Role" else ""))
            continue
        subjects = o.get("subjects") or []
        ours = [s for s in subjects if s.get("kind") == "ServiceAccount"
                and s.get("name") == sa_name and s.get("namespace") == sa_namespace]
        if not ours:
            error(f"{n}: subjects {subjects} do not name ServiceAccount {sa_namespace}/{sa_name}")
            continue
        if len(subjects) != len(ours):
            error(f"{n}: subjects other than the probe's ServiceAccount: {subjects}")
        bound.add(key)
        grants.append((ns, roles[key][1], n))
    for key in roles:
        if key not in bound:
            error(f"{key[0]}/{key[2]}: bound to nothing")
    return grants


def covered(grants, group, resource, namespace):
    for scope, rules, _ in grants:
        if scope is not None and scope != namespace:
            continue  # a RoleBinding grants in its namespace only; None = every namespace
        for r in rules:
            verbs = set(r.get("verbs") or [])
            if ((group in (r.get("apiGroups") or []) or "*" in (r.get("apiGroups") or []))
                    and (resource in (r.get("resources") or []) or "*" in (r.get("resources") or []))
                    and (NEEDED_VERBS <= verbs or "*" in verbs) and not r.get("resourceNames")):
                return True
    return False


def check_rbac(objs, ds, configs, mode):
    """The ServiceAccount's grants let every configuration's discovery list and watch what
    it reads. `configs`: (where, TOML text). mode: cluster (ClusterRole) or namespaced
    (Roles only)."""
    kinds = {o.get("kind") for o in objs}
    if mode == "cluster" and not {"ClusterRole", "ClusterRoleBinding"} <= kinds:
        error("the base needs a ClusterRole and ClusterRoleBinding (discovery's read access)")
    if mode == "namespaced" and kinds & {"ClusterRole", "ClusterRoleBinding"}:
        error("the namespaced variant must not contain a ClusterRole or ClusterRoleBinding")
    if mode == "namespaced" and not {"Role", "RoleBinding"} <= kinds:
        error("the namespaced variant needs Roles and RoleBindings")
    pod = ds["spec"]["template"]["spec"]
    sa_name = pod.get("serviceAccountName", "default")
    own = ds["metadata"].get("namespace")
    grants = rbac_grants(objs, sa_name, own)
    needs = 0
    for where, text in configs:
        try:
            cfg = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            error(f"{where}: not TOML: {e}")
            continue
        for group, resource, ns, at in config_needs(cfg, own, where):
            needs += 1
            if ns is None and not covered(grants, group, resource, None):
                error(f"{at}: watches {resource} in every namespace, which needs a ClusterRole "
                      f"bound by a ClusterRoleBinding ({mode} RBAC does not grant it): set the "
                      "block's namespace, or use the cluster-wide base")
            elif ns is not None and not covered(grants, group, resource, ns):
                error(f"{at}: nothing lets ServiceAccount {own}/{sa_name} list and watch "
                      f"{resource} ({group or 'core'}) in namespace {ns}")
    return len(grants), needs


def cmd_rbac_covers(rendered, *configs):
    objs = load_all(rendered)
    ds = find(objs, "DaemonSet")
    if ds is None:
        done("")
    texts = []
    for path in configs:
        with open(path, encoding="utf-8") as f:
            texts.append((path, f.read()))
    mode = "namespaced" if "ClusterRole" not in {o.get("kind") for o in objs} else "cluster"
    grants, needs = check_rbac(objs, ds, texts, mode)
    done(f"{mode} RBAC ({grants} binding(s)) covers the {needs} API read(s) of "
         f"{len(configs)} configuration(s)")


def cmd_objects(rendered, secret_example, mode="cluster"):
    objs = load_all(rendered)
    for o in objs:
        check_metadata(o, namespaced=o.get("kind") not in CLUSTER_SCOPED)
    # The namespace is the user's: an object for it would relabel (Pod Security) or, on
    # `kubectl delete -k`, delete a namespace others share, such as `monitoring`.
    if any(o.get("kind") == "Namespace" for o in objs):
        error("the base must not hold a Namespace object")
    ds = find(objs, "DaemonSet")
    pod_labels, port_names, grants, needs = {}, set(), 0, 0
    if ds is not None:
        pod_labels, port_names, config_text = check_daemonset(ds, objs)
        if config_text is not None:
            grants, needs = check_rbac(objs, ds, [("inferprobe.toml", config_text)], mode)
    svc = find(objs, "Service")
    if svc is not None:
        sspec = svc.get("spec") or {}
        if sspec.get("clusterIP") != "None":
            error(f"{name_of(svc)}: must be headless (clusterIP: None)")
        if not (sspec.get("selector") or {}).items() <= pod_labels.items() or not sspec.get("selector"):
            error(f"{name_of(svc)}: selector does not select the DaemonSet's pods")
        sports = sspec.get("ports") or []
        if not any(p.get("name") == PORT_NAME and p.get("targetPort") in (PORT_NAME, 9464) for p in sports):
            error(f"{name_of(svc)}: needs port {PORT_NAME} targeting the container's {PORT_NAME}")
    pm = find(objs, "PodMonitor")
    if pm is not None:
        check_podmonitor(pm, pod_labels, port_names)
    rules = 0
    pr = find(objs, "PrometheusRule")
    if pr is not None:
        rules = check_prometheusrule(pr)
    # A default kube-prometheus-stack's Prometheus selects both by its release label.
    for o in (pm, pr):
        if o is not None and "release" not in ((o.get("metadata") or {}).get("labels") or {}):
            error(f"{name_of(o)}: no `release` label: a default kube-prometheus-stack ignores it")
    # The example Secret: the name and key the DaemonSet and config expect, a placeholder.
    docs = load_all(secret_example)
    if len(docs) != 1 or docs[0].get("kind") != "Secret":
        error(f"{secret_example}: one Secret expected")
    else:
        s = docs[0]
        check_metadata(s)
        if s["metadata"].get("name") != SECRET_NAME:
            error(f"{secret_example}: name must be {SECRET_NAME}")
        values = {**(s.get("stringData") or {}), **(s.get("data") or {})}
        if "api-key" not in values:
            error(f"{secret_example}: key api-key expected")
        if any("REPLACE" not in str(v) for v in values.values()):
            error(f"{secret_example}: values must be placeholders (containing REPLACE)")
    done(f"{len(objs)} objects consistent; {mode} RBAC ok ({grants} binding(s), the config's "
         f"{needs} API read(s) granted); PodMonitor ok; PrometheusRule ok ({rules} rules)")


# ---- rules ------------------------------------------------------------------------------

def cmd_rules_match(rule_path, *files):
    want = []
    for f in files:
        doc = load_all(f)
        if len(doc) != 1 or set(doc[0]) != {"groups"}:
            error(f"{f}: a rule file must be one document with only `groups`")
            continue
        want.extend(doc[0]["groups"])
        check_rule_groups(f, doc[0]["groups"])
    (pr,) = load_all(rule_path)
    # The alert-label contract adds the probe's namespace to every alert (and the series'
    # own as replica_namespace); everything else is the files' text.
    namespace = pr["metadata"]["namespace"]
    for group in pr["spec"]["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            labels = rule.get("labels", {})
            if labels.pop("namespace", None) != namespace:
                error(f"{rule_path}: {rule['alert']}: no `namespace: {namespace}` label")
            annotations = rule.get("annotations", {})
            if annotations.pop("replica_namespace", None) != "{{ $labels.namespace }}":
                error(f"{rule_path}: {rule['alert']}: no replica_namespace annotation")
    if pr["spec"]["groups"] != want:
        error(f"{rule_path}: spec.groups differ from the groups of {', '.join(files)}")
    done(f"{rule_path}: spec.groups = the {len(want)} groups of {len(files)} rule file(s)")


def cmd_rules_file(rule_path):
    (pr,) = load_all(rule_path)
    yaml.safe_dump({"groups": pr["spec"]["groups"]}, sys.stdout, sort_keys=False)


# ---- config -----------------------------------------------------------------------------

def cmd_config(rendered, secrets_dir):
    """The ConfigMap's config.toml with every path under the secrets mount moved to
    SECRETS_DIR (each given a placeholder file), for `inferprobe check` outside a pod."""
    objs = load_all(rendered)
    ds = find(objs, "DaemonSet")
    if ds is None:
        done("")
    _, _, text = check_daemonset(ds, objs)
    if text is None or errors:
        done("")
    os.makedirs(secrets_dir, exist_ok=True)
    for rel in sorted(set(re.findall(re.escape(SECRETS_DIR) + r"/([A-Za-z0-9._-]+)", text))):
        with open(os.path.join(secrets_dir, rel), "w", encoding="utf-8") as f:
            f.write("placeholder-api-key\n")
        print(f"{SECRETS_DIR}/{rel} -> placeholder {secrets_dir}/{rel}", file=sys.stderr)
    sys.stdout.write(text.replace(SECRETS_DIR + "/", os.path.abspath(secrets_dir) + "/"))


# ---- dockerfile -------------------------------------------------------------------------

def cmd_dockerfile(dockerfile, rendered):
    with open(dockerfile, encoding="utf-8") as f:
        text = f.read()
    froms = re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", text, re.M)
    if len(froms) < 2:
        error(f"{dockerfile}: a multi-stage build expected")
    for image in froms:
        if ":" not in image.split("/")[-1] and "@" not in image:
            error(f"{dockerfile}: FROM {image} has no tag")
    rust = re.search(r"^FROM\s+(--platform=\S+\s+)?rust:(\d+)\.(\d+)(?:\.\d+)?-\S+", text, re.M)
    # amd64 and arm64 nodes (GH200): the build stage runs on the builder's platform and
    # cross-compiles for TARGETARCH, which emulation would make many times slower.
    if rust and (rust.group(1) or "").strip() != "--platform=$BUILDPLATFORM":
        error(f"{dockerfile}: the build stage must run FROM --platform=$BUILDPLATFORM (cross-compiling "
              "for TARGETARCH; docker buildx --platform linux/amd64,linux/arm64)")
    if not re.search(r"^ARG TARGETARCH", text, re.M) or '--target "${triple}"' not in text:
        error(f"{dockerfile}: the build must cross-compile for ARG TARGETARCH (cargo build --target)")
    if not rust:
        error(f"{dockerfile}: the build stage must use an official rust:<version>-... image")
    else:
        with open("Cargo.toml", "rb") as f:
            msrv = tomllib.load(f)["package"].get("rust-version", "0.0")
        have = (int(rust.group(2)), int(rust.group(3)))
        need = tuple(int(x) for x in msrv.split(".")[:2])
        if have < need:
            error(f"{dockerfile}: rust {have} is older than Cargo.toml's rust-version {msrv}")
    if "cargo build --release --locked" not in text:
        error(f"{dockerfile}: the build must run cargo build --release --locked")
    if not re.search(r"^ARG INFERPROBE_BUILD_REVISION", text, re.M):
        error(f"{dockerfile}: ARG INFERPROBE_BUILD_REVISION missing (build.rs reads it)")
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    if not user or user[-1].split(":")[0] != "65532":
        error(f"{dockerfile}: the final stage must run as USER 65532")
    if not re.search(r"^EXPOSE\s+9464\b", text, re.M):
        error(f"{dockerfile}: EXPOSE 9464 missing")
    entry = re.search(r"^ENTRYPOINT\s+(\[.*\])", text, re.M)
    if not entry or f'"{CONFIG_PATH}"' not in entry.group(1) or '"run"' not in entry.group(1):
        error(f"{dockerfile}: ENTRYPOINT must run the binary with run --config {CONFIG_PATH}")
    ds = find(load_all(rendered), "DaemonSet")
    if ds is not None:
        c = ds["spec"]["template"]["spec"]["containers"][0]
        args = c.get("args") or []
        if CONFIG_PATH not in args and not (entry and CONFIG_PATH in entry.group(1)):
            error("the DaemonSet does not point the daemon at the mounted config")
        # args are appended to the ENTRYPOINT (they replace CMD only): the command the
        # container runs must name exactly one subcommand.
        command = (json.loads(entry.group(1))[1:] if entry else []) + list(c.get("command") or []) + args
        subcommands = [w for w in command if w in ("run", "check", "simulate", "bench", "demo")]
        if len(subcommands) != 1:
            error(f"the container would run `inferprobe {' '.join(command)}`: "
                  "exactly one subcommand expected (args append to the ENTRYPOINT)")
    done(f"{dockerfile}: stages {', '.join(froms)}; non-root, port 9464, {CONFIG_PATH}")


def cmd_docker_context(dockerfile, dockerignore, out):
    """Lay out what the build stage's COPY instructions put in its WORKDIR, from the build
    context .dockerignore lets through, so cargo can be asked whether it builds there."""
    import shutil

    with open(dockerignore, encoding="utf-8") as f:
        ignore = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    if ignore[:1] != ["*"] or not all(l.startswith("!") for l in ignore[1:]):
        sys.exit(f"FAIL: {dockerignore}: only the allowlist form ('*', then '!path' lines) is "
                 "understood by this check; extend scripts/validate_deploy.py")
    allowed = {os.path.normpath(l[1:]) for l in ignore[1:]}
    with open(dockerfile, encoding="utf-8") as f:
        text = f.read()
    first_stage = re.split(r"^FROM\s", text, flags=re.M)[1]
    copied = []
    for line in re.findall(r"^COPY\s+(?!--from)(.*)$", first_stage, re.M):
        *srcs, dest = [w for w in line.split() if not w.startswith("--")]
        for src in srcs:
            src = os.path.normpath(src)
            if src not in allowed:
                error(f"{dockerignore}: leaves out {src}, which the Dockerfile copies")
                continue
            if not os.path.exists(src):
                error(f"{dockerfile}: COPY {src}: no such file in the repository")
                continue
            # Docker's rules: a directory's contents go into DEST; a file goes into DEST
            # when DEST ends in / (or is .), else becomes DEST.
            target = os.path.join(out, os.path.normpath(dest))
            if os.path.isdir(src):
                shutil.copytree(src, target, dirs_exist_ok=True)
            else:
                if dest.endswith("/") or os.path.normpath(dest) == ".":
                    target = os.path.join(target, os.path.basename(src))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(src, target)
            copied.append(src)
    done(f"build context: {', '.join(copied)}")


COMMANDS = {
    "docker-context": cmd_docker_context,
    "kustomization": cmd_kustomization,
    "component": cmd_component,
    "overlay": cmd_overlay,
    "rbac-covers": cmd_rbac_covers,
    "render": cmd_render,
    "split": cmd_split,
    "objects": cmd_objects,
    "rules-match": cmd_rules_match,
    "rules-file": cmd_rules_file,
    "config": cmd_config,
    "dockerfile": cmd_dockerfile,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
