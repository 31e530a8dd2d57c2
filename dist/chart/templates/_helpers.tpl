{{/* The manager's image: repository with the digest, else the tag. */}}
{{- define "tend.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The manager's flags beyond config/default's, one "- flag" per line. */}}
{{- define "tend.managerArgs" -}}
{{- if and (not .Values.webhook.enabled) .Values.crds.install }}
{{- fail "webhook.enabled false needs crds.install false: the CRDs would send their conversions to this release, which serves none. Install the CRDs with the release whose webhook is enabled (docs/helm.md)" }}
{{- end }}
{{- with .Values.watchNamespaces }}
- --watch-namespaces={{ join "," . }}
{{- end }}
{{- with .Values.sqs.endpoint }}
- --sqs-endpoint={{ . }}
{{- end }}
{{- with .Values.sqs.region }}
- --sqs-region={{ . }}
{{- end }}
{{- if not .Values.webhook.enabled }}
- --webhook-disabled
{{- else if .Values.webhook.certManager.enabled }}
- --webhook-cert-mode=external
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
