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
