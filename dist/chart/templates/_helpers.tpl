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
{{- with .Values.watchNamespaces }}
- --watch-namespaces={{ join "," . }}
{{- end }}
{{- with .Values.sqs.endpoint }}
- --sqs-endpoint={{ . }}
{{- end }}
{{- with .Values.sqs.region }}
- --sqs-region={{ . }}
{{- end }}
{{- if .Values.webhook.certManager.enabled }}
- --webhook-cert-mode=external
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
