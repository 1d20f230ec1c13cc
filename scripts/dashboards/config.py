"""The one place a user changes what the dashboards select, as the monitoring mixins'
`_config` (kubernetes-mixin, node-mixin): the site labels every aggregation keeps and every
dashboard filters on, and the template variables every selector matches."""

CONFIG = {
    # The labels that tell sites apart behind Thanos, Mimir or federation (the mixins'
    # `clusterLabel`): first in every `by (...)` that names a target-level label, and a
    # variable each. `--site-labels region,cluster` replaces them.
    "site_labels": ["cluster"],
    # The template variables every inferprobe selector matches, in this order.
    "variables": ["target", "model", "node", "pod"],
    "datasource": {"type": "prometheus", "uid": "${datasource}"},
}
