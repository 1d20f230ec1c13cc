{{/* The probe's identity on every series: `node` and `probe_pod`; Prometheus's own `pod` and
`namespace` target labels (the probe's) dropped, so those names mean a discovered replica or
nothing (the daemon labels a replica's series with its own; honorLabels keeps them). */}}
{{- define "inferprobe.relabelings" -}}
# The probe's node, on the series the daemon does not label (process_*, build_info, ...).
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: node
  action: replace
# The probe pod, on every series (the daemon sets the same value on its targets').
- sourceLabels: [__meta_kubernetes_pod_name]
  targetLabel: probe_pod
  action: replace
# After the Operator's own relabelings, which set `pod` and `namespace` to the probe's.
- action: labeldrop
  regex: pod|namespace
{{- end }}
