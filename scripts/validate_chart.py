"""Checks for scripts/validate-chart.sh (run in the venv of scripts/validate-deploy.sh: PyYAML,
jsonschema). One subcommand per step; each exits non-zero naming what is wrong.

  split RENDERED CORE CUSTOM        core kinds (for kubernetes-validate) and custom resources
  crds RENDERED CRD_DIR             every custom resource against its vendored CRD schema
  objects RENDERED RELEASE NS VALUES...
                                    labels, selectors, names (<= 63, unique), namespaces,
                                    tolerations and update strategy per kind, the user's
                                    labels and annotations merged, RBAC against the config,
                                    monitors' label semantics, dashboards (sizes)
  base CHART KUSTOMIZE              the chart's default output against the Kustomize base
  rules RENDERED VALUES...          the PrometheusRule's groups = config/prometheus/*.yml's
                                    under the alert-label contract and these values
  rollouts RENDERED VALUES...       AnalysisTemplate/MetricTemplates = config/rollouts/*.yaml
  kps RENDERED FIXTURE [RELEASE]    a kube-prometheus-stack with the fixture's defaults (as
                                    RELEASE) selects the monitors, rules and dashboards
  schema SCHEMA VALUES              the schema refuses the rules' own alert labels and each
                                    kind's wrong update strategies (jsonschema, draft 7)
  notes OUTPUT VALUES SET_ARGS      `helm install --dry-run=client --set SET_ARGS`'s NOTES
  config RENDERED OUT_DIR           the ConfigMap's config.toml for `inferprobe check`, paths
                                    moved into OUT_DIR (prints the config's path)

VALUES: the chart's values.yaml, then each -f file, merged as Helm merges them. Every YAML
document read is refused if a mapping has a key twice (UniqueKeyLoader).
"""

import copy
import glob
import json
import os
import pathlib
import re
import sys
import tomllib

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_deploy as vd  # noqa: E402  (RBAC coverage: the same rules as the base's)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
STANDARD_LABELS = ("helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                   "app.kubernetes.io/version", "app.kubernetes.io/managed-by")
# Labels the chart's objects may have beyond the Kustomize base's, and no others.
CHART_ONLY_LABELS = {"helm.sh/chart", "app.kubernetes.io/version", "app.kubernetes.io/managed-by",
                     "release"}
# Pod template annotations the chart adds (the base rolls pods by a hashed ConfigMap name).
CHART_ONLY_POD_ANNOTATIONS = {"checksum/config", "checksum/canary"}
CORE_KINDS = {"ServiceAccount", "ConfigMap", "Secret", "DaemonSet", "Deployment", "Service",
              "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "NetworkPolicy",
              "PodDisruptionBudget"}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding"}
CUSTOM_GROUPS = ("monitoring.coreos.com/", "argoproj.io/", "flagger.app/")
ANNOTATION_LIMIT = 262144  # kubectl.kubernetes.io/last-applied-configuration, all annotations
SOURCE_RUNBOOK = "https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md"
OLD_SEVERITIES = {"page": "critical", "ticket": "warning"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

# One list of failures with validate_deploy's, whose checks (RBAC, label semantics, rule
# groups) report into it directly.
errors, error, done = vd.errors, vd.error, vd.done


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping with a key twice: Helm and PyYAML keep the
    last silently, kustomize and Flux refuse the document."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key].line + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        try:
            return [d for d in yaml.load_all(f, Loader=UniqueKeyLoader) if d is not None]
        except yaml.constructor.ConstructorError as e:
            print(f"FAIL: {path}: {e}", file=sys.stderr)
            sys.exit(1)


def name_of(o):
    meta = o.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{o.get('kind')}/{ns + '/' if ns else ''}{meta.get('name')}"


def merge(a, b):
    """Helm's coalescing of values: maps merge, anything else replaces (null deletes)."""
    out = copy.deepcopy(a)
    for k, v in b.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_values(paths):
    values = {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            values = merge(values, yaml.safe_load(f) or {})
    return values


def of_kind(objs, kind):
    return [o for o in objs if o.get("kind") == kind]


def one(objs, kind):
    found = of_kind(objs, kind)
    if len(found) != 1:
        error(f"expected one {kind}, found {len(found)}")
        return None
    return found[0]


def go_json_size(obj):
    """Bytes of the object as Go's encoding/json writes it (kubectl's last-applied
    annotation): compact, UTF-8, with <, > and & escaped as \\u003c, \\u003e, \\u0026."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    s = s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return len(s.encode("utf-8"))


# ---- split ---------------------------------------------------------------------------------

def cmd_split(rendered, core_out, custom_out):
    core, custom = [], []
    for o in load_all(rendered):
        if str(o.get("apiVersion", "")).startswith(CUSTOM_GROUPS):
            custom.append(o)
        elif o.get("kind") in CORE_KINDS:
            core.append(o)
        else:
            error(f"{name_of(o)}: kind not expected from this chart")
    for path, objs in ((core_out, core), (custom_out, custom)):
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(objs, f, sort_keys=False)
    kinds = lambda objs: ", ".join(f"{n} {k}" for k, n in sorted(count(objs).items()))
    done(f"{len(core)} core objects ({kinds(core)}); {len(custom)} custom resources"
         + (f" ({kinds(custom)})" if custom else ""))


def count(objs):
    c = {}
    for o in objs:
        c[o["kind"]] = c.get(o["kind"], 0) + 1
    return c


# ---- crds ----------------------------------------------------------------------------------

def strict_schema(s):
    """An OpenAPI v3 structural schema as JSON Schema, as strict as the API server's field
    validation: unknown fields refused unless x-kubernetes-preserve-unknown-fields."""
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in ("properties", "patternProperties", "definitions"):
            out[k] = {pk: strict_schema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties", "not"):
            out[k] = strict_schema(v) if isinstance(v, dict) else v
        elif k in ("anyOf", "allOf", "oneOf"):
            out[k] = [strict_schema(x) for x in v]
        elif k.startswith("x-kubernetes-") or k in ("nullable", "format"):
            continue
        else:
            out[k] = v
    if s.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if ("properties" in out and "additionalProperties" not in out
            and not s.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def check_metadata(o):
    n = name_of(o)
    meta = o.get("metadata")
    if not isinstance(meta, dict):
        error(f"{n}: metadata missing")
        return
    if set(meta) - {"name", "namespace", "labels", "annotations"}:
        error(f"{n}: unexpected metadata {sorted(set(meta) - {'name', 'namespace', 'labels', 'annotations'})}")
    if not DNS_SUBDOMAIN.match(str(meta.get("name", ""))):
        error(f"{n}: metadata.name is not a DNS subdomain")
    for key in ("labels", "annotations"):
        m = meta.get(key) or {}
        if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
            error(f"{n}: metadata.{key} must map strings to strings")
    for k, v in (meta.get("labels") or {}).items():
        if len(str(v)) > 63 or not re.match(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", str(v)):
            error(f"{n}: label {k}={v!r} is not a valid label value")


def cmd_crds(rendered, crd_dir):
    import jsonschema

    schemas = {}
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        schemas[(doc["apiVersion"], doc["kind"])] = (os.path.basename(path),
                                                     strict_schema(doc["openAPIV3Schema"]))
    checked = {}
    for o in load_all(rendered):
        key = (o.get("apiVersion"), o.get("kind"))
        if not str(key[0]).startswith(CUSTOM_GROUPS):
            continue
        if key not in schemas:
            error(f"{name_of(o)}: no vendored schema for {key[0]} {key[1]} in {crd_dir}")
            continue
        check_metadata(o)
        fname, schema = schemas[key]
        body = {k: v for k, v in o.items() if k != "metadata"}
        body["metadata"] = {}
        v = jsonschema.Draft7Validator(schema)
        for e in sorted(v.iter_errors(body), key=lambda e: list(e.absolute_path)):
            path = ".".join(str(p) for p in e.absolute_path)
            error(f"{name_of(o)}: {path or '(root)'}: {e.message[:300]}")
        checked[f"{key[1]} ({fname})"] = checked.get(f"{key[1]} ({fname})", 0) + 1
    done("custom resources valid against the vendored CRD schemas: "
         + (", ".join(f"{n} {k}" for k, n in sorted(checked.items())) or "none rendered"))


# ---- objects -------------------------------------------------------------------------------

def selector_matches(sel, labels):
    """A Kubernetes LabelSelector against a label map."""
    if sel is None:
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def workload(objs):
    found = [o for o in objs if o.get("kind") in ("DaemonSet", "Deployment")]
    if len(found) != 1:
        error(f"expected one DaemonSet or Deployment, found {len(found)}")
        return None
    return found[0]


def config_text(objs, wl):
    """The config.toml the chart renders (None with an existing ConfigMap or Secret)."""
    vols = {v["name"]: v for v in wl["spec"]["template"]["spec"].get("volumes", [])}
    ref = (vols.get("config") or {}).get("configMap", {}).get("name")
    for o in of_kind(objs, "ConfigMap"):
        if o["metadata"]["name"] == ref:
            return o["data"].get("config.toml")
    return None


def cmd_objects(rendered, release, namespace, *value_files):
    values = load_values(value_files)
    objs = load_all(rendered)
    name = values.get("nameOverride") or "inferprobe"
    selector = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": release}
    if of_kind(objs, "Namespace"):
        error("the chart must not create a Namespace")
    for o in objs:
        n = name_of(o)
        check_metadata(o)
        labels = o["metadata"].get("labels") or {}
        for k in STANDARD_LABELS:
            if k not in labels:
                error(f"{n}: standard label {k} missing")
        if labels.get("app.kubernetes.io/instance") != release:
            error(f"{n}: app.kubernetes.io/instance must be the release name {release}")
        if labels.get("app.kubernetes.io/managed-by") != "Helm":
            error(f"{n}: app.kubernetes.io/managed-by must be Helm")
        ns = o["metadata"].get("namespace")
        if o["kind"] in CLUSTER_SCOPED:
            if ns:
                error(f"{n}: cluster-scoped, yet a namespace")
        elif not ns:
            error(f"{n}: no metadata.namespace")
        elif o["kind"] not in ("Role", "RoleBinding", "ConfigMap", "AnalysisTemplate", "MetricTemplate") and ns != namespace:
            error(f"{n}: namespace must be the release namespace {namespace}")
    check_names(objs)
    wl = workload(objs)
    if wl is None:
        done("")
    n = name_of(wl)
    if wl["kind"] != values["kind"]:
        error(f"{n}: kind must be {values['kind']}")
    check_strategy(n, wl, values)
    if wl["spec"]["selector"] != {"matchLabels": selector}:
        error(f"{n}: selector must be name and instance only: {wl['spec']['selector']}")
    tpl = wl["spec"]["template"]
    pod_labels = tpl["metadata"].get("labels") or {}
    if not selector.items() <= pod_labels.items():
        error(f"{n}: the pod template's labels do not carry the selector's")
    pod = tpl["spec"]
    own_config = not (values.get("existingConfigMap") or values.get("existingConfigSecret"))
    annotations = tpl["metadata"].get("annotations") or {}
    # tolerations null: the kind's default (a DaemonSet every taint, as the base; a Deployment
    # none: a blanket toleration keeps its pods on cordoned and dead nodes); a list as given.
    want_tol = values.get("tolerations")
    if want_tol is None:
        want_tol = [{"operator": "Exists"}] if values["kind"] == "DaemonSet" else []
    if (values["kind"] == "Deployment" and "tolerations" not in load_values(value_files[1:])
            and pod.get("tolerations")):
        error(f"{n}: a Deployment with the chart's default tolerations tolerates "
              f"{pod['tolerations']}: drain would reschedule onto the cordoned node, and pods "
              "would never leave an unreachable one")
    if (pod.get("tolerations") or []) != want_tol:
        error(f"{n}: tolerations {pod.get('tolerations')}, expected {want_tol} "
              f"(tolerations {values.get('tolerations')!r}, kind {values['kind']})")
    # The user's maps are in the merged ones, their values winning (but for the keys the
    # schema refuses: selector and standard labels, the checksums).
    user_in(n + " pod template labels", values.get("podLabels"), pod_labels)
    user_in(n + " pod template annotations", values.get("podAnnotations"), annotations)
    if not values["serviceAccount"]["create"] and pod.get("serviceAccountName") != values["serviceAccount"]["name"]:
        error(f"{n}: serviceAccount.create false: the pods must run as serviceAccount.name "
              f"{values['serviceAccount']['name']!r}, not {pod.get('serviceAccountName')!r}")
    if own_config and not re.fullmatch(r"[0-9a-f]{64}", annotations.get("checksum/config", "")):
        error(f"{n}: no checksum/config annotation (a config change would not roll the pods)")
    # Every ConfigMap and Secret the pod mounts is the chart's or named in values.
    cms = {o["metadata"]["name"] for o in of_kind(objs, "ConfigMap")}
    for v in pod.get("volumes", []):
        cm = (v.get("configMap") or {}).get("name")
        if cm and cm not in cms and cm not in (values.get("existingConfigMap"), values.get("existingCanaryConfigMap")) \
                and not any(cm == (x.get("configMap") or {}).get("name") for x in values.get("extraVolumes") or []):
            error(f"{n}: volume {v['name']} mounts ConfigMap {cm}, which nothing provides")
    secret = [v for v in pod.get("volumes", []) if v["name"] == "api-keys"]
    if not secret or secret[0]["secret"]["secretName"] != values["apiKeys"]["existingSecret"]:
        error(f"{n}: the api-keys volume must mount apiKeys.existingSecret")
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    if mounts.get("api-keys") != "/etc/inferprobe/secrets":
        error(f"{n}: the API keys must be mounted at /etc/inferprobe/secrets")
    # The image runs `--config` vd.CONFIG_PATH; a subPath mount is never updated by the
    # kubelet, so a reload of an edited existingConfigMap would read the old file.
    config_mount = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "config"]
    if not config_mount or config_mount[0]["mountPath"] != vd.CONFIG_DIR \
            or config_mount[0].get("subPath"):
        error(f"{n}: the configuration must be mounted as the directory {vd.CONFIG_DIR}, "
              f"without subPath: {config_mount}")
    # Linux nodes of the image's architectures only (a DaemonSet tolerates every taint).
    node_selector = pod.get("nodeSelector") or {}
    want_os = (values.get("nodeSelector") or {}).get("kubernetes.io/os", "linux")
    if want_os and node_selector.get("kubernetes.io/os") != want_os:
        error(f"{n}: nodeSelector lacks kubernetes.io/os: {want_os} ({node_selector})")
    arches = values.get("architectures") or []
    node_affinity = (pod.get("affinity") or {}).get("nodeAffinity")
    if arches and not (values.get("affinity") or {}).get("nodeAffinity"):
        terms = (((node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                 .get("nodeSelectorTerms") or [])
        if terms != [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In",
                                             "values": arches}]}]:
            error(f"{n}: the pods must require kubernetes.io/arch in {arches}: {node_affinity}")
    image = pod["containers"][0]["image"]
    want = (f"{values['image']['repository']}@{values['image']['digest']}" if values["image"]["digest"]
            else f"{values['image']['repository']}:{values['image']['tag'] or chart_app_version()}")
    if image != want:
        error(f"{n}: image {image}, expected {want}")
    ports = {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}
    if ports != {"metrics": 9464}:
        error(f"{n}: ports must be metrics 9464 only: {ports}")
    for kind, path in (("Service", ("spec", "selector")), ("PodMonitor", ("spec", "selector", "matchLabels")),
                       ("ServiceMonitor", ("spec", "selector", "matchLabels")),
                       ("NetworkPolicy", ("spec", "podSelector", "matchLabels")),
                       ("PodDisruptionBudget", ("spec", "selector", "matchLabels"))):
        for o in of_kind(objs, kind):
            got = o
            for p in path:
                got = (got or {}).get(p)
            if got != selector:
                error(f"{name_of(o)}: selector must be name and instance only, is {got}")
    svc = of_kind(objs, "Service")
    for o in svc:
        if o["spec"].get("clusterIP") != "None" or o["spec"]["ports"] != [
                {"name": "metrics", "port": 9464, "targetPort": "metrics", "protocol": "TCP"}]:
            error(f"{name_of(o)}: must be headless with port metrics 9464")
    for kind, key in (("PodMonitor", "podMonitor"), ("ServiceMonitor", "serviceMonitor"),
                      ("Probe", "probe"), ("PrometheusRule", "prometheusRule")):
        # <key>.labels wins over `release: <monitoring.release>`.
        release_label = (values[key].get("labels") or {}).get(
            "release", (values.get("monitoring") or {}).get("release"))
        for o in of_kind(objs, kind):
            labels = o["metadata"].get("labels") or {}
            if release_label and labels.get("release") != release_label:
                error(f"{name_of(o)}: no label release={release_label} (monitoring.release, {key}.labels)")
            user_in(f"{name_of(o)} labels", values[key].get("labels"), labels)
    probes = of_kind(objs, "Probe")
    if len(probes) != values["probe"]["enabled"]:
        error("the Probe rendered does not follow probe.enabled")
    for o in probes:
        spec = o["spec"]
        svc_name = svc[0]["metadata"]["name"] if svc else None
        want = f"{svc_name}.{o['metadata']['namespace']}.svc:9464"
        if spec["prober"] != {"url": want, "path": "/probe"}:
            error(f"{name_of(o)}: prober must be the headless Service {want} at /probe: {spec['prober']}")
        if spec["targets"]["staticConfig"]["static"] != values["probe"]["targets"]:
            error(f"{name_of(o)}: targets are not probe.targets")
    # The cloud identity: each value as the annotation (and AKS's pod label) its platform reads.
    cloud = values.get("cloudIdentity") or {}
    want_annotations = {k: cloud.get(v) for k, v in (
        ("eks.amazonaws.com/role-arn", "awsRoleArn"),
        ("iam.gke.io/gcp-service-account", "gcpServiceAccount"),
        ("azure.workload.identity/client-id", "azureClientId")) if cloud.get(v)}
    for o in of_kind(objs, "ServiceAccount"):
        got = o["metadata"].get("annotations") or {}
        for k, v in want_annotations.items():
            if got.get(k) != v:
                error(f"{name_of(o)}: annotation {k} is {got.get(k)!r}, cloudIdentity says {v!r}")
    if cloud.get("azureClientId") and pod_labels.get("azure.workload.identity/use") != "true":
        error(f"{n}: cloudIdentity.azureClientId without the pod label azure.workload.identity/use: \"true\"")
    monitors = of_kind(objs, "PodMonitor") + of_kind(objs, "ServiceMonitor")
    if len(monitors) != (values["podMonitor"]["enabled"] + values["serviceMonitor"]["enabled"]):
        error("the monitors rendered do not follow podMonitor.enabled / serviceMonitor.enabled")
    for o in monitors:
        spec = o["spec"]
        if spec.get("jobLabel") != "app.kubernetes.io/name":
            error(f"{name_of(o)}: jobLabel must be app.kubernetes.io/name")
        job_source = pod_labels if o["kind"] == "PodMonitor" else (svc[0]["metadata"]["labels"] if svc else {})
        if job_source.get("app.kubernetes.io/name") != "inferprobe" and not values.get("nameOverride"):
            error(f"{name_of(o)}: the job would not be `inferprobe`")
        for i, ep in enumerate(spec.get("podMetricsEndpoints") or spec.get("endpoints") or []):
            at = f"{name_of(o)}: endpoint {i}"
            if ep.get("port") != "metrics" or ep.get("interval") != "30s":
                error(f"{at}: port metrics, interval 30s (the recording rules' interval)")
            vd.check_label_semantics(at, ep, ep.get("relabelings") or [])
    # RBAC: the configuration's discovery (and fleet) reads are granted.
    text = config_text(objs, wl)
    reads = grants = 0
    mode = values["rbac"]["mode"]
    kinds = {o["kind"] for o in objs}
    if mode == "cluster" and not {"ClusterRole", "ClusterRoleBinding"} <= kinds:
        error("rbac.mode cluster: no ClusterRole and binding")
    if mode != "cluster" and kinds & {"ClusterRole", "ClusterRoleBinding"}:
        error(f"rbac.mode {mode}: a ClusterRole rendered")
    if mode == "none" and kinds & {"Role", "RoleBinding"}:
        error("rbac.mode none: Roles rendered")
    if mode != "none":
        sa = pod.get("serviceAccountName")
        if values["serviceAccount"]["create"] and not any(
                o["metadata"]["name"] == sa for o in of_kind(objs, "ServiceAccount")):
            error(f"{n}: ServiceAccount {sa} is not rendered")
        g = vd.rbac_grants(objs, sa, namespace)
        grants = len(g)
        if text is not None:
            cfg = tomllib.loads(text)
            for group, resource, ns, at in vd.config_needs(cfg, namespace, "config.toml"):
                reads += 1
                if not vd.covered(g, group, resource, ns):
                    error(f"{at}: {resource} in {ns or 'every namespace'} is not granted by the "
                          f"{mode} RBAC")
        if mode == "namespaced":
            for ns in values["rbac"]["namespaces"]:
                if not vd.covered(g, "", "pods", ns):
                    error(f"rbac.namespaces: nothing granted in {ns}")
    if text is not None:
        cfg = tomllib.loads(text)
        fleet = (cfg.get("kubernetes") or {}).get("fleet_selector")
        if fleet:
            want_sel = dict(kv.split("=", 1) for kv in fleet.split(","))
            if want_sel != selector:
                error(f"config.toml: kubernetes.fleet_selector {fleet!r} does not select exactly "
                      f"this release's pods {selector}")
        if not str(cfg.get("listen", "")).endswith(":9464"):
            error("config.toml: listen must be on port 9464 (the container port)")
    # Dashboards: one ConfigMap per dashboards/*.json, the same JSON, under the size limit.
    sizes = cmd_dashboards(objs, values, namespace)
    done(f"{len(objs)} objects ({wl['kind']}, {mode} RBAC: {grants} binding(s), "
         f"{reads} API read(s) of the config granted); selectors name+instance; "
         f"dashboards: {sizes}")


def check_names(objs):
    """Every object's name at most 63 characters (a Service's, a label value's limit; the chart
    holds every name to it) and unique per kind and namespace: a name truncated after its
    suffix (-dashboard-overview, -dashboard-target) could make two objects one."""
    seen = {}
    for o in objs:
        meta = o["metadata"]
        name = str(meta.get("name", ""))
        if len(name) > 63:
            error(f"{name_of(o)}: name of {len(name)} characters, over 63")
        key = (o["kind"], meta.get("namespace"), name)
        if key in seen:
            error(f"{name_of(o)}: two objects of this kind and name in one namespace")
        seen[key] = o


DEPLOYMENT_ROLLING = {"maxSurge": "25%", "maxUnavailable": 0}
DAEMONSET_ROLLING = {"maxUnavailable": "10%"}


def check_strategy(n, wl, values):
    """A DaemonSet's updateStrategy (RollingUpdate|OnDelete), a Deployment's strategy
    (RollingUpdate|Recreate); rollingUpdate only with RollingUpdate (the API server refuses it
    otherwise), as given or the kind's default."""
    ds = wl["kind"] == "DaemonSet"
    field, other = ("updateStrategy", "strategy") if ds else ("strategy", "updateStrategy")
    types = ("RollingUpdate", "OnDelete") if ds else ("RollingUpdate", "Recreate")
    if other in wl["spec"]:
        error(f"{n}: spec.{other} is not a {wl['kind']}'s field")
    got = wl["spec"].get(field) or {}
    given = values.get("updateStrategy") or {}
    want_type = given.get("type") or "RollingUpdate"
    if got.get("type") not in types:
        error(f"{n}: spec.{field}.type {got.get('type')!r}: a {wl['kind']}'s is one of {types}")
    if got.get("type") != want_type:
        error(f"{n}: spec.{field}.type {got.get('type')!r}, values say {want_type!r}")
    if got.get("type") == "RollingUpdate":
        want = given.get("rollingUpdate") or (DAEMONSET_ROLLING if ds else DEPLOYMENT_ROLLING)
        if got.get("rollingUpdate") != want:
            error(f"{n}: spec.{field}.rollingUpdate {got.get('rollingUpdate')}, expected {want}")
    elif "rollingUpdate" in got:
        error(f"{n}: spec.{field}.rollingUpdate with type {got.get('type')} (the API server "
              f"refuses it: may not be specified when strategy `type` is '{got.get('type')}')")


def user_in(what, user, got):
    """The user's label or annotation map is in the rendered one, each value the user's."""
    for k, v in (user or {}).items():
        if got.get(k) != v:
            error(f"{what}: {k}={v!r} from values rendered as {got.get(k)!r}")


def cmd_dashboards(objs, values, namespace):
    d = values["dashboards"]
    sources = sorted(glob.glob(os.path.join(ROOT, "dashboards", "*.json")))
    cms = [o for o in of_kind(objs, "ConfigMap") if (o["metadata"].get("labels") or {}).get(d["label"]) is not None]
    if not d["enabled"]:
        if cms:
            error("dashboards.enabled false, yet dashboard ConfigMaps")
        return "off"
    if len(cms) != len(sources):
        error(f"{len(cms)} dashboard ConfigMaps for {len(sources)} dashboards in dashboards/")
    by_file = {}
    for o in cms:
        n = name_of(o)
        if len(o.get("data", {})) != 1:
            error(f"{n}: one dashboard per ConfigMap")
            continue
        (fname, text), = o["data"].items()
        by_file[fname] = (o, text)
        want_value = (d.get("labels") or {}).get(d["label"], d["labelValue"])  # dashboards.labels wins
        if o["metadata"]["labels"][d["label"]] != want_value:
            error(f"{n}: label {d['label']} must be {want_value!r}")
        user_in(f"{n} labels", d.get("labels"), o["metadata"]["labels"])
        user_in(f"{n} annotations", d.get("annotations"), o["metadata"].get("annotations") or {})
        if o["metadata"]["namespace"] != (d["namespace"] or namespace):
            error(f"{n}: must be in namespace {d['namespace'] or namespace}")
        folder = (d.get("annotations") or {}).get(d["folderAnnotation"], d["folder"])
        if d["folderAnnotation"] and (o["metadata"].get("annotations") or {}).get(d["folderAnnotation"]) != folder:
            error(f"{n}: folder annotation {d['folderAnnotation']}={folder!r} missing")
    sizes = []
    for src in sources:
        fname = os.path.basename(src)
        if fname not in by_file:
            error(f"no dashboard ConfigMap holds {fname}")
            continue
        o, text = by_file[fname]
        with open(src, encoding="utf-8") as f:
            if json.loads(text) != json.load(f):
                error(f"{name_of(o)}: {fname} differs from dashboards/{fname}")
        size = go_json_size(o)
        if size >= ANNOTATION_LIMIT:
            error(f"{name_of(o)}: {size} bytes as JSON, not under the {ANNOTATION_LIMIT} bytes of "
                  "kubectl's last-applied-configuration annotation")
        sizes.append(f"{o['metadata']['name']} {size} B ({100 * size / ANNOTATION_LIMIT:.0f}% of {ANNOTATION_LIMIT})")
    return "; ".join(sizes)


def chart_app_version():
    with open(os.path.join(ROOT, "charts/inferprobe/Chart.yaml"), encoding="utf-8") as f:
        return str(yaml.safe_load(f)["appVersion"])


# ---- base ----------------------------------------------------------------------------------

HASH_SUFFIX = re.compile(r"-[a-z0-9]{10}$")


def strip_hash(name):
    return HASH_SUFFIX.sub("", name)


def compare_labels(n, chart_meta, base_meta):
    c, b = chart_meta.get("labels") or {}, base_meta.get("labels") or {}
    for k in set(c) | set(b):
        if k in CHART_ONLY_LABELS:
            continue
        if c.get(k) != b.get(k):
            error(f"{n}: label {k}: chart {c.get(k)!r}, base {b.get(k)!r}")


def diff(n, what, chart, base):
    if chart != base:
        error(f"{n}: {what} differs from the Kustomize base:\n  chart: {json.dumps(chart, sort_keys=True)[:600]}\n"
              f"  base:  {json.dumps(base, sort_keys=True)[:600]}")


def cmd_base(chart_rendered, base_rendered):
    chart = load_all(chart_rendered)
    base = load_all(base_rendered)
    key = lambda o: (o.get("kind"), strip_hash(o["metadata"]["name"]), o["metadata"].get("namespace"))
    bases = {key(o): o for o in base}
    compared = []
    for o in chart:
        k = key(o)
        if k not in bases:
            continue
        b = bases[k]
        n = name_of(o)
        compare_labels(n, o["metadata"], b["metadata"])
        if o["kind"] == "DaemonSet":
            diff(n, "spec.selector", o["spec"]["selector"], b["spec"]["selector"])
            diff(n, "spec.updateStrategy", o["spec"].get("updateStrategy"), b["spec"].get("updateStrategy"))
            ct, bt = o["spec"]["template"], b["spec"]["template"]
            compare_labels(f"{n} pod template", ct["metadata"], bt["metadata"])
            ca = {a: v for a, v in (ct["metadata"].get("annotations") or {}).items()
                  if a not in CHART_ONLY_POD_ANNOTATIONS}
            diff(n, "pod annotations", ca, bt["metadata"].get("annotations") or {})
            cp, bp = copy.deepcopy(ct["spec"]), copy.deepcopy(bt["spec"])
            (cc,), (bc,) = cp.pop("containers"), bp.pop("containers")
            for field in sorted(set(cc) | set(bc)):
                diff(n, f"container {field}", cc.get(field), bc.get(field))
            for spec in (cp, bp):
                for v in spec.get("volumes", []):
                    if "configMap" in v:
                        v["configMap"]["name"] = strip_hash(v["configMap"]["name"])
            for field in sorted(set(cp) | set(bp)):
                diff(n, f"pod {field}", cp.get(field), bp.get(field))
        elif o["kind"] in ("ClusterRole", "Role"):
            diff(n, "rules", o["rules"], b["rules"])
        elif o["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            diff(n, "roleRef", o["roleRef"], b["roleRef"])
            diff(n, "subjects", o["subjects"], b["subjects"])
        elif o["kind"] in ("Service", "PodMonitor"):
            diff(n, "spec", o["spec"], b["spec"])
        elif o["kind"] == "ServiceAccount":
            diff(n, "automountServiceAccountToken", o.get("automountServiceAccountToken"),
                 b.get("automountServiceAccountToken"))
        elif o["kind"] == "ConfigMap":
            diff(n, "data", o.get("data"), b.get("data"))
        elif o["kind"] == "PrometheusRule":
            # Held to config/prometheus/*.yml by `rules`; here only reported.
            same = o["spec"] == b["spec"]
            print(f"  PrometheusRule: {'the same groups as' if same else 'differs from'} the base's "
                  "prometheusrule.yaml" + ("" if same else " (scripts/gen-prometheusrule.sh's "
                                           "output; the chart is held to the sources)"))
        else:
            continue
        compared.append(f"{o['kind']}/{o['metadata']['name']}")
    chart_keys = {key(o) for o in chart}
    for k, b in bases.items():
        if k not in chart_keys and k[0] != "Namespace":
            error(f"{k[0]}/{k[1]}: in the Kustomize base, not in the chart's default output")
    for need in ("DaemonSet", "PodMonitor", "Service"):
        if not any(c.startswith(need + "/") for c in compared):
            error(f"no {need} compared with the base")
    done(f"equal to the Kustomize base ({len(compared)} objects: {', '.join(compared)}) but for the "
         f"labels {sorted(CHART_ONLY_LABELS)}, the pod annotations {sorted(CHART_ONLY_POD_ANNOTATIONS)} "
         "and the ConfigMaps' name hash")


# ---- rules ---------------------------------------------------------------------------------

def source_groups(values, namespace):
    """config/prometheus/*.yml's groups under the alert-label contract, as these values write it."""
    pr = values["prometheusRule"]
    base = pr["runbookBaseUrl"]
    # The SLO groups at the chart's budget window (slo.window), as scripts/gen-slo-rules.py
    # writes them; the shipped files hold its default.
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_slo_rules", os.path.join(ROOT, "scripts/gen-slo-rules.py"))
    slo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(slo)
    windowed = {str(p): text for p, text in slo.render(values["slo"]["window"]).items()}
    want = []
    for path in sorted(glob.glob(os.path.join(ROOT, "config/prometheus/*.yml"))
                       + glob.glob(os.path.join(ROOT, "config/prometheus/*.yaml"))):
        text = windowed.get(str(pathlib.Path(path).resolve()))
        docs = ([d for d in yaml.load_all(text, Loader=UniqueKeyLoader) if d is not None]
                if text is not None else load_all(path))
        for g in docs[0]["groups"]:
            for r in g["rules"]:
                if "alert" not in r:
                    continue
                labels = r["labels"]
                sev = OLD_SEVERITIES.get(labels["severity"], labels["severity"])
                labels["severity"] = pr["severities"][sev]
                if pr["namespaceLabel"]:
                    labels["namespace"] = namespace
                labels.update(pr["alertLabels"])
                anchor = r["annotations"]["runbook_url"].split("#", 1)[1]
                r["annotations"]["runbook_url"] = f"{base}#{anchor}"
                if pr["namespaceLabel"]:
                    # The series' own namespace (a discovered replica's), which the static
                    # label hides: an annotation, never a label (a label expanding to nothing
                    # reaches ALERTS as the raw template).
                    r["annotations"]["replica_namespace"] = "{{ $labels.namespace }}"
            want.append(g)
    return want


def cmd_rules(rendered, namespace, *value_files):
    values = load_values(value_files)
    objs = load_all(rendered)
    prs = of_kind(objs, "PrometheusRule")
    if not values["prometheusRule"]["enabled"]:
        if prs:
            error("prometheusRule.enabled false, yet a PrometheusRule")
        done("no PrometheusRule (disabled)")
        return
    if len(prs) != 1:
        error(f"expected one PrometheusRule, found {len(prs)}")
        done("")
    got = prs[0]["spec"]["groups"]
    want = source_groups(values, namespace)
    rules = vd.check_rule_groups(name_of(prs[0]), got)
    if got != want:
        gi = {g["name"]: g for g in got}
        for g in want:
            if gi.get(g["name"]) != g:
                for a, b in zip(gi.get(g["name"], {}).get("rules", []), g["rules"]):
                    if a != b:
                        error(f"group {g['name']}: rendered {json.dumps(a)[:400]}\n  expected {json.dumps(b)[:400]}")
                        break
                else:
                    error(f"group {g['name']}: differs")
        error("the PrometheusRule's groups differ from config/prometheus/*.yml under the contract")
    alerts = [r for g in got for r in g["rules"] if "alert" in r]
    # The rules' own templates came through byte for byte (already in the equality; said
    # here for the record: the text Prometheus receives is the source's).
    templated = sum(1 for r in alerts for v in r["annotations"].values() if "{{" in v)
    sev = sorted({r["labels"]["severity"] for r in alerts})
    done(f"PrometheusRule: {len(got)} groups, {rules} rules ({len(alerts)} alerts) = "
         f"config/prometheus/*.yml with severities {sev}, runbook base "
         f"{values['prometheusRule']['runbookBaseUrl']}, namespace label "
         f"{values['prometheusRule']['namespaceLabel']}, alert labels "
         f"{values['prometheusRule']['alertLabels'] or '{}'}; {templated} annotations with Go "
         "templates, byte-identical")


# ---- rollouts ------------------------------------------------------------------------------

def cmd_rollouts(rendered, namespace, *value_files):
    values = load_values(value_files)
    objs = load_all(rendered)
    r = values["rollouts"]
    sources = {"argo": load_all(os.path.join(ROOT, "config/rollouts/argo-analysistemplate.yaml")),
               "flagger": load_all(os.path.join(ROOT, "config/rollouts/flagger-metrictemplates.yaml"))}
    kinds = {"argo": "AnalysisTemplate", "flagger": "MetricTemplate"}
    checked = []
    for key, docs in sources.items():
        got = of_kind(objs, kinds[key])
        if not r[key]["enabled"]:
            if got:
                error(f"rollouts.{key}.enabled false, yet {kinds[key]}s")
            continue
        if len(got) != len(docs):
            error(f"{len(got)} {kinds[key]}s rendered for {len(docs)} in config/rollouts/")
        by_name = {o["metadata"]["name"]: o for o in got}
        for d in docs:
            o = by_name.get(d["metadata"]["name"])
            if o is None:
                error(f"{kinds[key]} {d['metadata']['name']} not rendered")
                continue
            want = copy.deepcopy(d)
            text = json.dumps(want)
            addr = re.search(r"https?://prometheus-operated[^\s\"'\\]*", text).group(0)
            want = json.loads(text.replace(addr, r["prometheusAddress"]))
            if o["metadata"]["namespace"] != (r[key]["namespace"] or namespace):
                error(f"{name_of(o)}: must be in {r[key]['namespace'] or namespace}")
            w = {k: v for k, v in want.items() if k != "metadata"}
            g = {k: v for k, v in o.items() if k != "metadata"}
            diff(name_of(o), "spec (but the Prometheus address)", g, w)
            checked.append(name_of(o))
    done(f"rollout templates = config/rollouts/ (Prometheus {r['prometheusAddress']}): "
         + (", ".join(checked) or "none enabled"))


# ---- kps -----------------------------------------------------------------------------------

def cmd_kps(rendered, fixture, release=None):
    """A kube-prometheus-stack with the fixture's defaults, installed as RELEASE: does its
    Prometheus select the monitors and rules, and its Grafana sidecar the dashboards?"""
    with open(fixture, encoding="utf-8") as f:
        kps = yaml.safe_load(f)
    release = release or kps["release"]
    prom = kps["prometheus"]
    objs = load_all(rendered)

    def selector(kind):
        # templates/prometheus/prometheus.yaml: the value if set, else release=<name> when
        # *SelectorNilUsesHelmValues, else {} (everything).
        if prom[f"{kind}Selector"]:
            return prom[f"{kind}Selector"]
        if prom[f"{kind}SelectorNilUsesHelmValues"]:
            return {"matchLabels": {"release": release}}
        return {}

    def namespace_ok(sel, ns):
        if sel is None:  # null: the Prometheus's own namespace
            return ns == kps["namespace"]
        return selector_matches(sel, {"kubernetes.io/metadata.name": ns})

    report = []
    for kind, sel_kind in (("PodMonitor", "podMonitor"), ("ServiceMonitor", "serviceMonitor"),
                           ("Probe", "probe"), ("PrometheusRule", "rule")):
        for o in of_kind(objs, kind):
            labels = o["metadata"].get("labels") or {}
            ok = selector_matches(selector(sel_kind), labels) and namespace_ok(
                prom[f"{sel_kind}NamespaceSelector"], o["metadata"]["namespace"])
            if not ok:
                error(f"{name_of(o)}: not selected by kube-prometheus-stack release {release}'s "
                      f"Prometheus ({sel_kind}Selector {selector(sel_kind)})")
            report.append(f"{kind} selected by {sel_kind}Selector {json.dumps(selector(sel_kind))}")
    sc = kps["grafana"]["sidecar"]["dashboards"]
    search = sc["searchNamespace"]
    dashboards = [o for o in of_kind(objs, "ConfigMap") if sc["label"] in (o["metadata"].get("labels") or {})]
    folder = "General"
    if sc.get("folderAnnotation") and (sc.get("provider") or {}).get("foldersFromFilesStructure"):
        folder = f"from annotation {sc['folderAnnotation']}"
    for o in dashboards:
        ns = o["metadata"]["namespace"]
        label_ok = not sc["labelValue"] or o["metadata"]["labels"][sc["label"]] == sc["labelValue"]
        if search in (None, ""):
            ns_ok = ns == kps["namespace"]
        elif search == "ALL":
            ns_ok = True
        else:
            wanted = search if isinstance(search, list) else str(search).split(",")
            ns_ok = ns in wanted
        if not (sc["enabled"] and label_ok and ns_ok):
            error(f"{name_of(o)}: not imported by kube-prometheus-stack's Grafana sidecar "
                  f"(label {sc['label']}={sc['labelValue']!r}, searchNamespace {search})")
    if not dashboards:
        error("no dashboard ConfigMap the sidecar's label selects")
    report.append(f"{len(dashboards)} dashboard ConfigMaps imported by the sidecar "
                  f"({sc['label']}={sc['labelValue']!r}, searchNamespace {search}; folder: {folder})")
    # The model is not vacuous: a kps installed under another release name selects nothing.
    other = {"matchLabels": {"release": release + "-other"}}
    if any(selector_matches(other, o["metadata"].get("labels") or {})
           for o in of_kind(objs, "PodMonitor") + of_kind(objs, "ServiceMonitor") + of_kind(objs, "Probe")
           + of_kind(objs, "PrometheusRule")):
        error(f"a kps released as {release}-other would select these objects too: the model is vacuous")
    done(f"kube-prometheus-stack release {release} (tests/fixtures/chart/kps-defaults.yaml): "
         + "; ".join(report))


# ---- config --------------------------------------------------------------------------------

def cmd_config(rendered, out_dir):
    objs = load_all(rendered)
    wl = workload(objs)
    if wl is None:
        done("")
    text = config_text(objs, wl)
    if text is None:
        error("no config.toml rendered (existingConfigMap?)")
        done("")
    os.makedirs(os.path.join(out_dir, "secrets"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "canary"), exist_ok=True)
    for rel in sorted(set(re.findall(r"/etc/inferprobe/secrets/([A-Za-z0-9._-]+)", text))):
        with open(os.path.join(out_dir, "secrets", rel), "w", encoding="utf-8") as f:
            f.write("placeholder-api-key\n")
    vols = {v["name"]: v for v in wl["spec"]["template"]["spec"]["volumes"]}
    canary = vols["canary"]["configMap"]["name"]
    for o in of_kind(objs, "ConfigMap"):
        if o["metadata"]["name"] == canary:
            for fname, content in o["data"].items():
                with open(os.path.join(out_dir, "canary", fname), "w", encoding="utf-8") as f:
                    f.write(content)
    out = os.path.abspath(out_dir)
    text = text.replace("/etc/inferprobe/secrets/", f"{out}/secrets/").replace(
        "/etc/inferprobe/canary/", f"{out}/canary/")
    path = os.path.join(out_dir, "config.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(path)


# ---- schema --------------------------------------------------------------------------------

def cmd_schema(schema_path, values_path):
    """values.schema.json refuses, per the sources: every label the alerting rules set
    themselves (and Prometheus's alertname) in prometheusRule.alertLabels, `namespace` there
    while namespaceLabel is on; each kind's update strategy types and no other."""
    import jsonschema

    with open(schema_path, encoding="utf-8") as f:
        validator = jsonschema.Draft7Validator(json.load(f))
    values = load_values([values_path])

    def valid(overlay):
        return not list(validator.iter_errors(merge(values, overlay)))

    if not valid({}):
        error(f"{values_path} does not meet {schema_path}")
    rule_labels = {"alertname"}
    for path in sorted(glob.glob(os.path.join(ROOT, "config/prometheus/*.y*ml"))):
        for g in load_all(path)[0]["groups"]:
            for r in g["rules"]:
                if "alert" in r:
                    rule_labels |= set(r.get("labels") or {})
    for key in sorted(rule_labels):
        if valid({"prometheusRule": {"alertLabels": {key: "x"}}}):
            error(f"prometheusRule.alertLabels.{key} accepted: the rules set {key} themselves "
                  "(a second key in one mapping)")
    if valid({"prometheusRule": {"alertLabels": {"namespace": "x"}}}):
        error("prometheusRule.alertLabels.namespace accepted beside namespaceLabel: true")
    if not valid({"prometheusRule": {"namespaceLabel": False, "alertLabels": {"namespace": "x"}}}):
        error("prometheusRule.alertLabels.namespace refused with namespaceLabel: false")
    if not valid({"prometheusRule": {"alertLabels": {"team": "ml {} }}"}}}):
        error("prometheusRule.alertLabels: a literal value refused")
    kinds = {"DaemonSet": {"RollingUpdate", "OnDelete"}, "Deployment": {"RollingUpdate", "Recreate"}}
    for kind, allowed in kinds.items():
        for t in ("RollingUpdate", "OnDelete", "Recreate"):
            ok = valid({"kind": kind, "updateStrategy": {"type": t}})
            if ok != (t in allowed):
                error(f"kind {kind}, updateStrategy.type {t}: {'accepted' if ok else 'refused'}")
            with_ru = valid({"kind": kind, "updateStrategy": {"type": t, "rollingUpdate": {"maxUnavailable": 1}}})
            if with_ru != (t in allowed and t == "RollingUpdate"):
                error(f"kind {kind}, updateStrategy.type {t} with rollingUpdate: "
                      f"{'accepted' if with_ru else 'refused'}")
    done(f"values.schema.json: refuses the rules' own labels {sorted(rule_labels)} and `namespace` "
         "(with namespaceLabel) as alert labels; update strategy types per kind, rollingUpdate "
         "only with RollingUpdate")


# ---- notes ---------------------------------------------------------------------------------

def cmd_notes(output, values_path, set_args):
    """The NOTES of `helm install --dry-run=client` with these --set values name the objects
    that are there, with the verb agreeing; say what node_local does under a Deployment; and,
    with the rules, that they are installed once per Prometheus."""
    values = load_values([values_path])
    for pair in set_args.split(","):
        key, _, raw = pair.partition("=")
        node = values
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = {"true": True, "false": False}.get(raw, raw)
    with open(output, encoding="utf-8") as f:
        text = f.read()
    if "NOTES:" not in text:
        error(f"{set_args}: no NOTES in the output")
        done("")
    notes = text.split("NOTES:", 1)[1]
    flat = " ".join(notes.split())
    objects = [k for k, v in (("PodMonitor", values["podMonitor"]["enabled"]),
                              ("ServiceMonitor", values["serviceMonitor"]["enabled"]),
                              ("PrometheusRule", values["prometheusRule"]["enabled"])) if v]
    for bad in (r"\bThe\s+and\b", r"\bthe\s+(has|have|carry|carries)\b", r"\bThe\s+(carry|carries)\b",
                r"\band\s+(carry|carries|has|have)\b", r"\bThe \w+ carry\b", r"\bThe \w+ and \w+ carries\b"):
        m = re.search(bad, flat)
        if m:
            error(f"{set_args}: NOTES: {m.group(0)!r}")
    if objects:
        one_ = len(objects) == 1
        names = " and ".join(objects)
        release = values["monitoring"]["release"]
        want = (f"The {names} {'carries' if one_ else 'carry'} `release: {release}`" if release
                else f"the {names} {'has' if one_ else 'have'} no `release` label")
        if want not in flat:
            error(f"{set_args}: NOTES lack {want!r}")
    elif "3. Prometheus" in notes:
        error(f"{set_args}: NOTES speak of Prometheus objects, and none is installed")
    default_node_local = re.search(r"(?m)^\s*node_local\s*=\s*true",
                                   open(os.path.join(ROOT, "config/kubernetes/inferprobe.toml")).read())
    says = "node_local = true" in flat
    if says != bool(values["kind"] == "Deployment" and default_node_local):
        error(f"{set_args}: NOTES {'speak' if says else 'do not speak'} of node_local under kind {values['kind']}")
    once = "once per Prometheus" in flat
    if once != bool(values["prometheusRule"]["enabled"]):
        error(f"{set_args}: NOTES {'say' if once else 'do not say'} the rules are installed once per Prometheus")
    done(f"NOTES: {', '.join(objects) or 'no Prometheus objects'} ({values['kind']})")


COMMANDS = {
    "schema": cmd_schema,
    "notes": cmd_notes,
    "split": cmd_split,
    "crds": cmd_crds,
    "objects": cmd_objects,
    "base": cmd_base,
    "rules": cmd_rules,
    "rollouts": cmd_rollouts,
    "kps": cmd_kps,
    "config": cmd_config,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
