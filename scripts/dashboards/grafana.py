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


def thresholds(base, *steps):
    """Absolute thresholds: `base` from -inf, then each `(value, colour)` from its value."""
    return {"mode": "absolute", "steps": [{"color": base, "value": None},
                                          *({"color": c, "value": v} for v, c in steps)]}


GREEN = thresholds("green")
# One scale per measure, so that both dashboards colour it alike.
SUCCESS = thresholds("red", (0.95, "orange"), (0.99, "green"))
STALENESS = thresholds("green", (60, "orange"), (300, "red"))
BUDGET_LEFT = thresholds("red", (0, "orange"), (0.25, "green"))
# 1 spends a budget in its window; 6 and 14.4 are the usual slow and fast burn alerts.
BURN_RATE = thresholds("green", (1, "orange"), (6, "red"), (14.4, "dark-red"))


def series(unit, axis="", *, min=0, max=None, steps=GREEN, stacked=False, lines=False,
           links=False, steps_first=False):
    """The field defaults of a time series in `unit`, a colour per line, from `min` to `max`."""
    # `stacked`: filled areas; `lines`: the `steps` drawn as lines; `links`: each line opens
    # its target in the target dashboard.
    custom = TIMESERIES_CUSTOM
    if axis or stacked or lines:
        custom = {**custom, "axisLabel": axis}
        if stacked:
            custom |= {"fillOpacity": 70, "stacking": {"group": "A", "mode": "normal"}}
        if lines:
            custom["thresholdsStyle"] = {"mode": "line"}
    d = {"unit": unit, "color": {"mode": "palette-classic"}, "custom": custom}
    bounds = [(k, v) for k, v in (("min", min), ("max", max)) if v is not None]
    # The key order of the shipped JSON, which the generated files keep byte for byte: the
    # first bound before the thresholds, another after them; `steps_first` for the panels
    # that list the thresholds before every bound.
    if not steps_first and bounds:
        d.update(bounds[:1])
        bounds = bounds[1:]
    d["thresholds"] = steps
    d.update(bounds)
    if links:
        d["links"] = [TARGET_LINK]
    return d


def seconds(axis="", links=False):
    """The field defaults of a latency time series: seconds from 0, a colour per line."""
    return series("s", axis, links=links)


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


def timeseries(title, grid, description, fields, *targets, overrides=None):
    """A time series of `targets` (`(expr, legend)` pairs or queries), `fields` its defaults."""
    return panel("timeseries", title, grid, description, queries(*targets), fields,
                 overrides=overrides)


def stat(title, grid, description, unit, target, steps=GREEN, decimals=None, links=False):
    """A stat of one query, its value coloured by `steps`."""
    d = {"unit": unit, "color": {"mode": "thresholds"}, "thresholds": steps}
    if decimals is not None:
        d["decimals"] = decimals
    if links:
        d["links"] = [TARGET_LINK]
    return panel("stat", title, grid, description, queries(target), d)


def table(title, grid, description, unit, *targets, overrides=None, transformations=None):
    """A table of `targets` in `unit`; an expression is an instant query, a row per series."""
    targets = [query(t, fmt="table", instant=True) if isinstance(t, str) else t for t in targets]
    d = {
        "unit": unit,
        "color": {"mode": "thresholds"},
        "thresholds": GREEN,
        "custom": {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False},
    }
    return panel("table", title, grid, description, queries(*targets), d, overrides=overrides,
                 transformations=transformations)


def merged(labels, columns):
    """Transformations merging queries A, B… into a row per `labels`, then a column each."""
    values = [f"Value #{chr(ord('A') + i)}" for i in range(len(columns))]
    return [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {
            "excludeByName": {"Time": True},
            "includeByName": {},
            "indexByName": {name: i for i, name in enumerate([*labels, *values])},
            "renameByName": dict(zip(values, columns)),
        }},
    ]


def heatmap_panel(title, grid, description, target, unit, y_unit=None, rows=None):
    """A heatmap of one query: a row per bucket, or (`rows`: a cell's name) per series."""
    y_axis = {"axisPlacement": "left", "reverse": False}
    if y_unit:
        y_axis["unit"] = y_unit
    options = {
        "calculate": False,
        "cellGap": 1,
        "cellValues": {"unit": unit},
        "color": {"exponent": 0.5, "fill": "dark-orange", "mode": "scheme", "reverse": False,
                  "scale": "exponential", "scheme": "Oranges", "steps": 64},
        "exemplars": {"color": "rgba(255,0,255,0.7)"},
        # Empty cells stay blank rather than taking the scale's lowest colour.
        "filterValues": {"le": 1e-09},
        "legend": {"show": True},
        "rowsFrame": {"layout": "auto"} if rows is None else {"layout": "unknown", "value": rows},
        "tooltip": {"mode": "single", "showColorScale": rows is not None,
                    "yHistogram": rows is None},
        "yAxis": y_axis,
    }
    d = {"unit": unit,
         "custom": {"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                    "scaleDistribution": {"type": "linear"}}}
    return panel("heatmap", title, grid, description, queries(target), d, options=options)


def override(name, *properties):
    """Field settings of the series or column `name`, from `(id, value)` pairs."""
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": k, "value": v} for k, v in properties]}


# A reference line (an SLO threshold, a budget, an alert line) reads apart from the data.
RED = ("color", {"fixedColor": "red", "mode": "fixed"})
DASHED = ("custom.lineStyle", {"dash": [10, 10], "fill": "dash"})
UNFILLED = ("custom.fillOpacity", 0)


def reference_line(name):
    """The series `name` drawn as a reference line: red, dashed, unfilled."""
    return override(name, RED, DASHED, UNFILLED)


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
    # The budget window the rules record (their label slo_window: scripts/gen-slo-rules.py
    # --window, the chart's slo.window), for the budget panels' titles: the dashboards follow
    # whatever window the rules were written for.
    window = _query_variable(
        "slo_window", "Budget window",
        f"label_values(inferprobe:sli_window_coverage:ratio{{{sites}}}, slo_window)", all_=False,
        description="The error budget's window, from the recording rules' label slo_window "
        "(7d by default, 30d where the Prometheus keeps 31 days).",
    )
    window["hide"] = 2
    out.append(window)
    return {"list": out}


def dashboard(uid, title, description, one_target=False):
    """A dashboard's settings around its panels, with the variables (`one_target`: of one)."""
    return {
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{
            "asDropdown": False,
            "icon": "dashboard",
            # The overview's picks carry over to the dashboards it links to; one target's
            # would narrow the overview to it.
            "includeVars": not one_target,
            "keepTime": True,
            "tags": ["inferprobe"],
            "targetBlank": False,
            "title": "inferprobe",
            "type": "dashboards",
        }],
        # gen-dashboards.py puts the panels after this key.
        "liveNow": False,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["inferprobe", "llm-inference", "slo"],
        "templating": variables(one_target=one_target),
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }
