{{/*
Names, labels and paths of the witness. The pod runs the coffre image's `coffre witness`, locked
down as the coffre chart's services are (non-root, read-only root filesystem, no capabilities,
no service account token).
*/}}

{{- define "witness.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name, kept to 52 characters: "<fullname>-headless" stays within 63. */}}
{{- define "witness.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "witness.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "witness.selectorLabels" -}}
app.kubernetes.io/name: {{ include "witness.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: witness
{{- end }}

{{- define "witness.labels" -}}
helm.sh/chart: {{ include "witness.chart" . }}
{{ include "witness.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: coffre
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "witness.image" -}}
{{- $image := .Values.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{- define "witness.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "witness.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Where the pod finds its state and the files of the Secrets it mounts. */}}
{{- define "witness.paths.state" -}}/var/lib/coffre-witness{{- end }}
{{- define "witness.paths.key" -}}/etc/coffre-witness/key{{- end }}
{{- define "witness.paths.tls" -}}/etc/coffre-witness/tls{{- end }}
{{- define "witness.paths.operators" -}}/etc/coffre-witness/operators{{- end }}

{{/* The API's port (HTTPS): the add-checkpoint protocol, /checkpoints, /key, /healthz, /metrics. */}}
{{- define "witness.port" -}}8444{{- end }}

{{/* Checks the JSON schema cannot express. Rendered by configmap.yaml. */}}
{{- define "witness.validate" -}}
{{- $w := .Values.witness }}
{{- if not $w.name }}
{{- fail "witness.name is empty: the witness's name in its cosignatures, e.g. witness.anj.fr" }}
{{- end }}
{{- if not $w.key.existingSecret }}
{{- fail "witness.key.existingSecret is empty: make the key with `coffre witness-keygen`, put it in a Secret (kubectl create secret generic NAME --from-file=witness-key.pem) and name it here" }}
{{- end }}
{{- if not $w.tls.existingSecret }}
{{- fail "witness.tls.existingSecret is empty: create a kubernetes.io/tls Secret with the witness's HTTPS certificate (kubectl create secret tls NAME --key … --cert …) and name it here" }}
{{- end }}
{{- if and $w.operatorCerts.existingConfigMap $w.operatorCerts.existingSecret }}
{{- fail "witness.operatorCerts: set existingConfigMap or existingSecret, not both" }}
{{- end }}
{{- if not (or $w.operatorCerts.existingConfigMap $w.operatorCerts.existingSecret) }}
{{- fail "witness.operatorCerts: name the ConfigMap or Secret holding the operators' signing certificates (existingConfigMap or existingSecret)" }}
{{- end }}
{{- if not (or $w.operatorCerts.files $w.operatorCerts.operators) }}
{{- fail "witness.operatorCerts.files or .operators: name the keys holding the operators' signing certificates; a witness that trusts nobody refuses every checkpoint" }}
{{- end }}
{{- end }}

{{- define "witness.probe" -}}
httpGet:
  path: /healthz
  port: https
  scheme: HTTPS
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end }}
