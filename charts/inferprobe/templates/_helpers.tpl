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

{{/* The configuration text the chart ships (values or files/), when not an existing object. */}}
{{- define "inferprobe.configText" -}}
{{- if .Values.config }}
{{- .Values.config }}
{{- else }}
{{- $selector := printf "fleet_selector = %s" (include "inferprobe.selectorString" . | quote) }}
{{- .Files.Get "files/inferprobe.toml" | replace "fleet_selector = \"app.kubernetes.io/name=inferprobe,app.kubernetes.io/instance=inferprobe\"" $selector }}
{{- end }}
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
