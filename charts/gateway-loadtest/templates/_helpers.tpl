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

{{/*
Locust's --locustfile: the locustfile, and the guard extension (load to locust.host only) when it is among
extraFiles (--set-file 'locust.extraFiles.gateway_sizer_guard\.py=locustfiles/gateway_sizer_guard.py').
*/}}
{{- define "gateway-loadtest.locustfiles" -}}
/locust/locustfile.py{{ if hasKey .extraFiles "gateway_sizer_guard.py" }},/locust/gateway_sizer_guard.py{{ end }}
{{- end }}
