{{/* The chart name (app.kubernetes.io/name, and so the Prometheus job). */}}
{{- define "inferprobe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of every object: the release name when it contains the chart name. */}}
{{- define "inferprobe.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* An object name made of the full name and a suffix (list $ "-config"): the full name is
shortened first, so the suffix survives the 63 characters (truncating after appending it
would cut the suffix, and make two names one). */}}
{{- define "inferprobe.suffixedName" -}}
{{- $suffix := index . 1 }}
{{- if gt (len $suffix) 40 }}
{{- fail (printf "inferprobe.suffixedName: suffix %q too long" $suffix) }}
{{- end }}
{{- printf "%s%s" (include "inferprobe.fullname" (index . 0) | trunc (int (sub 63 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{/* Maps merged into one (a dict merge: each key once, the later map's value wins), as YAML.
Labels and annotations from values go through it with the chart's own, so no key is
written twice (kustomize and Flux refuse a duplicate key; Helm keeps the last silently). */}}
{{- define "inferprobe.mergeMaps" -}}
{{- $out := dict }}
{{- range . }}
{{- range $k, $v := . }}
{{- $_ := set $out $k $v }}
{{- end }}
{{- end }}
{{- with $out }}{{ toYaml . }}{{ end }}
{{- end }}

{{/* An object's labels: (list $ CHART_EXTRA USER). Precedence, lowest first: the chart's
extra labels for the object (`release`, the dashboard sidecar's label), the user's map from
values, then Helm's standard labels (values.schema.json refuses those in the user's maps). */}}
{{- define "inferprobe.objectLabels" -}}
{{- include "inferprobe.mergeMaps" (list (index . 1) (index . 2) (include "inferprobe.labels" (index . 0) | fromYaml)) }}
{{- end }}

{{- define "inferprobe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Helm's standard labels. */}}
{{- define "inferprobe.labels" -}}
helm.sh/chart: {{ include "inferprobe.chart" . }}
{{ include "inferprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels: name and instance only (a workload's selector is immutable). */}}
{{- define "inferprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferprobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The same as a Kubernetes label selector string (kubernetes.fleet_selector). */}}
{{- define "inferprobe.selectorString" -}}
app.kubernetes.io/name={{ include "inferprobe.name" . }},app.kubernetes.io/instance={{ .Release.Name }}
{{- end }}

{{/* kube-prometheus-stack's selection label, for PodMonitor, ServiceMonitor, PrometheusRule. */}}
{{- define "inferprobe.monitoringLabels" -}}
{{- with .Values.monitoring.release }}
release: {{ . | quote }}
{{- end }}
{{- end }}

{{- define "inferprobe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inferprobe.fullname" .) .Values.serviceAccount.name }}
{{- else if .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the existing ServiceAccount the pods run as (the RBAC objects bind it; the namespace's `default` is not assumed)" }}
{{- end }}
{{- end }}

{{- define "inferprobe.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The configuration text the chart mounts (not with an existing ConfigMap or Secret),
checked first by inferprobe.config. */}}
{{- define "inferprobe.configText" -}}
{{- $_ := include "inferprobe.config" . }}
{{- .Values.config }}
{{- end }}

{{- define "inferprobe.canaryText" -}}
{{- .Values.canaryPrompts | default (.Files.Get "files/canary-prompts.jsonl") }}
{{- end }}

{{/* Whether the chart makes the config ConfigMap, and the canary ConfigMap. */}}
{{- define "inferprobe.ownConfig" -}}
{{- if not (or .Values.existingConfigMap .Values.existingConfigSecret) }}true{{ end }}
{{- end }}
{{- define "inferprobe.ownCanary" -}}
{{- if not .Values.existingCanaryConfigMap }}true{{ end }}
{{- end }}

{{/* A duration in milliseconds, or "" when it is not one: a number of seconds, or text in
the forms the daemon (humantime) and Prometheus both read ("25s", "1m30s", "40 s", "1min",
"1h 0m", "500ms"). */}}
{{- define "inferprobe.millis" -}}
{{- if or (kindIs "int" .) (kindIs "int64" .) (kindIs "float64" .) }}
{{- mulf (float64 .) 1000 | int64 }}
{{- else }}
{{- $d := toString . | trim }}
{{- if regexMatch "^([0-9]+ *[a-zA-Z]+ *)+$" $d }}
{{- $units := dict "ms" 1 "msec" 1 "s" 1000 "sec" 1000 "secs" 1000 "second" 1000 "seconds" 1000 "m" 60000 "min" 60000 "mins" 60000 "minute" 60000 "minutes" 60000 "h" 3600000 "hr" 3600000 "hrs" 3600000 "hour" 3600000 "hours" 3600000 "d" 86400000 "day" 86400000 "days" 86400000 "w" 604800000 "week" 604800000 "weeks" 604800000 "y" 31536000000 }}
{{- $total := 0 }}
{{- $ok := true }}
{{- range regexFindAll "[0-9]+ *[a-zA-Z]+" $d -1 }}
{{- $n := regexFind "^[0-9]+" . }}
{{- $unit := trimPrefix $n . | trim }}
{{- if hasKey $units $unit }}
{{- $total = add $total (mul (int64 $n) (index $units $unit)) }}
{{- else }}
{{- $ok = false }}
{{- end }}
{{- end }}
{{- if $ok }}{{ $total }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* A label selector's requirements as a sorted list ("a=b,c==d" and "c=d, a=b" are the
same selector). */}}
{{- define "inferprobe.selectorTerms" -}}
{{- $terms := list }}
{{- range splitList "," (toString .) }}
{{- $terms = append $terms (. | replace " " "" | replace "==" "=") }}
{{- end }}
{{- $terms | sortAlpha | toJson }}
{{- end }}

{{/* The chart's configuration parsed (a dict; empty with an existing ConfigMap or Secret).
Refuses to install without one, a text that is not TOML, and what would break the pods:
`listen` off port 9464, a shutdown_grace the kubelet would cut short, a fleet_selector that
does not select this release's pods. */}}
{{- define "inferprobe.config" -}}
{{- if include "inferprobe.ownConfig" . }}
{{- if not (trim .Values.config) }}
{{- fail (printf "no configuration: inferprobe installs no example endpoints (their failing probes would page). Give yours: --set-file config=inferprobe.toml (start from config/kubernetes/inferprobe.toml and check it with `inferprobe check --no-secrets --config inferprobe.toml`), or existingConfigMap / existingConfigSecret naming an object with the key config.toml. Its kubernetes.fleet_selector, if any: %q" (include "inferprobe.selectorString" .)) }}
{{- end }}
{{- $cfg := fromToml .Values.config }}
{{- if hasKey $cfg "Error" }}
{{- fail (printf "config: not TOML: %s" $cfg.Error) }}
{{- end }}
{{- with $cfg.listen }}
{{- $listen := toString . }}
{{- if not (hasSuffix ":9464" $listen) }}
{{- fail (printf "config: listen = %v: the chart's container port, probes and monitors use 9464" $listen) }}
{{- end }}
{{- if regexMatch "^(127\\.|\\[::1\\]|localhost:)" $listen }}
{{- fail (printf "config: listen = %v: a loopback address, which the kubelet's probes and Prometheus (on the pod IP) cannot reach; use 0.0.0.0:9464" $listen) }}
{{- end }}
{{- end }}
{{- /* The daemon's drain is shutdown_grace (25s by default) and up to 2 s more to export
its last spans; the kubelet's SIGKILL comes terminationGracePeriodSeconds after SIGTERM. */}}
{{- $graceText := ternary $cfg.shutdown_grace "25s" (hasKey $cfg "shutdown_grace") }}
{{- $grace := include "inferprobe.millis" $graceText }}
{{- if not $grace }}
{{- fail (printf "config: shutdown_grace = %v: the chart cannot read it to hold it below terminationGracePeriodSeconds; write seconds (25) or a duration like \"25s\"" $graceText) }}
{{- end }}
{{- if gt (add (int64 $grace) 2000) (mul (int64 $.Values.terminationGracePeriodSeconds) 1000) }}
{{- fail (printf "config: shutdown_grace = %v and 2 s to export the last spans are more than terminationGracePeriodSeconds (%v s): the kubelet would kill the pods before their drain ends; raise terminationGracePeriodSeconds" $graceText $.Values.terminationGracePeriodSeconds) }}
{{- end }}
{{- $kube := $cfg.kubernetes | default dict }}
{{- with $kube.fleet_selector }}
{{- if ne (include "inferprobe.selectorTerms" .) (include "inferprobe.selectorTerms" (include "inferprobe.selectorString" $)) }}
{{- fail (printf "config: kubernetes.fleet_selector = %q does not select this release's pods: set it to %q" (toString .) (include "inferprobe.selectorString" $)) }}
{{- end }}
{{- end }}
{{- with $kube.fleet_namespace }}
{{- if ne (toString .) $.Release.Namespace }}
{{- fail (printf "config: kubernetes.fleet_namespace = %q: the release's pods are in %q (leave it unset: the pod's own namespace)" (toString .) $.Release.Namespace) }}
{{- end }}
{{- end }}
{{- /* Environment and flags the daemon reads over the file would slip past these checks. */}}
{{- range $.Values.extraEnv }}
{{- if has .name (list "INFERPROBE_LISTEN" "INFERPROBE_SHUTDOWN_GRACE") }}
{{- fail (printf "extraEnv: %s overrides the configuration's %s past the chart's checks: set it in the configuration" .name (lower (trimPrefix "INFERPROBE_" .name))) }}
{{- end }}
{{- end }}
{{- range $.Values.extraArgs }}
{{- if or (hasPrefix "--listen" .) (hasPrefix "--config" .) }}
{{- fail (printf "extraArgs: %s: the chart sets the configuration and its listen address; set it in the configuration" .) }}
{{- end }}
{{- end }}
{{- toJson $cfg }}
{{- else }}
{{- "{}" }}
{{- end }}
{{- end }}

{{/* What the configuration's discovery reads in the Kubernetes API: {"cluster": bool (a block
that names no namespace), "namespaces": [...]}. */}}
{{- define "inferprobe.discoveryNamespaces" -}}
{{- $cfg := include "inferprobe.config" . | fromJson }}
{{- $cluster := false }}
{{- $namespaces := list }}
{{- range $cfg.discovery | default list }}
{{- if has (toString .source) (list "pods" "endpointslices" "inferencepool") }}
{{- if .namespace }}
{{- $namespaces = append $namespaces (toString .namespace) }}
{{- else }}
{{- $cluster = true }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson (dict "cluster" $cluster "namespaces" ($namespaces | uniq | sortAlpha)) }}
{{- end }}
