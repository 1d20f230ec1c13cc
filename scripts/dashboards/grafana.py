"""Grafana's JSON model, the few shapes the dashboards use: a panel of each kind with the
settings they share, a query, a row. What a panel does not say is what every panel of its
kind here has, so a panel's source names only what sets it apart."""

import copy

from .config import CONFIG

# What most panels of a kind have; a panel passes its own to differ.
TIMESERIES_CUSTOM = {
    "axisLabel": "",
    "axisPlacement": "auto",
    "drawStyle": "line",
    "fillOpacity": 10,
    "lineWidth": 1,
    "showPoints": "never",
    "spanNulls": False,
    "stacking": {"group": "A", "mode": "none"},
    "thresholdsStyle": {"mode": "off"},
}
OPTIONS = {
    "timeseries": {
        "legend": {
            "calcs": ["mean", "max", "lastNotNull"],
            "displayMode": "table",
            "placement": "bottom",
            "showLegend": True,
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    },
    "stat": {
        "colorMode": "value",
        "graphMode": "area",
        "justifyMode": "auto",
        "orientation": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "textMode": "auto",
    },
    "table": {
        "cellHeight": "sm",
        "footer": {"countRows": False, "fields": "", "reducer": ["sum"], "show": False},
        "showHeader": True,
    },
}
TARGET_LINK = {
    "title": "Open ${__field.labels.target} in the target dashboard",
    "url": "/d/inferprobe-target/inferprobe-target?${datasource:queryparam}"
    "&var-target=${__field.labels.target}&${__url_time_range}",
}


def seconds(links=False):
    """The field defaults of a latency time series: seconds from 0, a colour per line, and
    (`links`) each line opening its target in the target dashboard."""
    d = {
        "unit": "s",
        "color": {"mode": "palette-classic"},
        "custom": TIMESERIES_CUSTOM,
        "min": 0,
        "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]},
    }
    if links:
        d["links"] = [TARGET_LINK]
    return d


def query(expr, legend="", ref="A", fmt=None, instant=False, exemplar=None):
    """A Prometheus query of a panel."""
    q = {
        "datasource": dict(CONFIG["datasource"]),
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend,
        "range": not instant,
        "instant": instant,
        "refId": ref,
    }
    if fmt is not None:
        q["format"] = fmt
    if exemplar is not None:
        q["exemplar"] = exemplar
    return q


def queries(*specs):
    """Queries A, B, C… from `(expr, legend)` pairs or query dicts without a refId."""
    out = []
    for i, spec in enumerate(specs):
        q = query(*spec) if isinstance(spec, tuple) else dict(spec)
        q["refId"] = chr(ord("A") + i)
        out.append(q)
    return out


def panel(kind, title, grid, description, targets, defaults, options=None,
          overrides=None, transformations=None):
    """A panel of `kind` at `grid` (x, y, w, h): `defaults` its fieldConfig defaults."""
    p = {
        "id": None,
        "gridPos": {"h": grid[3], "w": grid[2], "x": grid[0], "y": grid[1]},
        "type": kind,
        "title": title,
        "description": description,
        "datasource": dict(CONFIG["datasource"]),
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "targets": targets,
        "options": copy.deepcopy(OPTIONS.get(kind, {})) if options is None else options,
    }
    if transformations is not None:
        p["transformations"] = transformations
    return p


def row(title, y, panels=None, collapsed=False):
    """A row at height `y`; a collapsed row holds its panels."""
    r = {"collapsed": collapsed, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "id": None}
    if panels is not None:
        r["panels"] = panels
    r["title"] = title
    r["type"] = "row"
    return r


def _query_variable(name, label, definition, all_=True, description=None):
    v = {
        "current": {},
        "datasource": dict(CONFIG["datasource"]),
        "definition": definition,
        "hide": 0,
        "includeAll": all_,
        "label": label,
        "multi": all_,
        "name": name,
        "options": [],
        "query": definition,
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }
    if all_:
        # All as `.*`, which also matches series without the label.
        v["allValue"] = ".*"
    if description:
        v["description"] = description
    return v


def variables(one_target=False):
    """The data source, a variable per site label, then target, model, node and pod, each
    listed from `inferprobe_requests_total` of the sites picked."""
    out = [{
        "current": {}, "hide": 0, "includeAll": False, "label": "Data source", "multi": False,
        "name": "datasource", "options": [], "query": "prometheus", "refresh": 1, "regex": "",
        "skipUrlSync": False, "type": "datasource",
    }]
    for label in CONFIG["site_labels"]:
        definition = f"label_values(inferprobe_requests_total, {label})"
        v = _query_variable(
            label, label, definition,
            description=f"The site label `{label}` (Thanos, Mimir, federation). All (`.*`) also "
            "matches series without it: with one site, leave it at All.",
        )
        v["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        v["query"] = {"query": definition, "refId": "site"}
        out.append(v)
    sites = ", ".join(f'{l}=~"${l}"' for l in CONFIG["site_labels"])
    of = lambda label: f"label_values(inferprobe_requests_total{{{sites}}}, {label})"  # noqa: E731
    out += [
        _query_variable("target", "Target", of("target"), all_=not one_target),
        _query_variable("model", "Model", of("model")),
        _query_variable("node", "Node", of("node")),
        _query_variable(
            "pod", "Replica (pod)", of("pod"),
            description="A discovered replica's pod (the `pod` label of a [[discovery]] block's "
            "targets). All also matches series without a pod: configured targets and a pool's "
            "gateway.",
        ),
    ]
    return {"list": out}
