{{/* Labels on every object. */}}
{{- define "gateway-loadtest.labels" -}}
app.kubernetes.io/part-of: gateway-loadtest
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* image: repository:tag */}}
{{- define "gateway-loadtest.image" -}}
{{ printf "%s:%s" .repository .tag }}
{{- end }}
