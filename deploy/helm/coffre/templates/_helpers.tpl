{{/*
Names, labels and the pod spec the services share.
Templates that take a component are called with (dict "ctx" $ "component" "ingest|vault|acquittal|regulator").
*/}}

{{- define "coffre.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's base name. Kept to 40 characters so that "<fullname>-acquittal-<hash>-<suffix>" and
the vault's "<fullname>-vault-<n>" pod names stay within 63.
*/}}
{{- define "coffre.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "coffre.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coffre.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coffre.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "coffre.labels" -}}
helm.sh/chart: {{ include "coffre.chart" .ctx }}
{{ include "coffre.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: coffre
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end }}

{{- define "coffre.image" -}}
{{- $image := .Values.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{- define "coffre.serviceAccountName" -}}
{{- $sa := (index .ctx.Values .component).serviceAccount }}
{{- if $sa.create }}
{{- default (printf "%s-%s" (include "coffre.fullname" .ctx) .component) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{/* The data directory: the vault's volume, ingest's emptyDir. */}}
{{- define "coffre.dataDir" -}}/var/lib/coffre{{- end }}
{{/* The regulator API's own writable folder: access log, export bundles being built, development
certificate (the folder "regulator" of the vault's volume beside the vault, an emptyDir otherwise). */}}
{{- define "coffre.regulatorDir" -}}/var/lib/coffre-regulator{{- end }}

{{/* Whether the regulator API runs, and where: "sidecar" (in the vault pods), "deployment", or "". */}}
{{- define "coffre.regulatorMode" -}}
{{- if .Values.api.enabled }}{{ ternary "deployment" "sidecar" (eq .Values.archive.backend "s3") }}{{ end }}
{{- end }}

{{/* The regulator API's ops port: 8081 beside the vault (8080 is the vault's), 8080 in its own pods. */}}
{{- define "coffre.regulatorOpsPort" -}}
{{- ternary 8081 8080 (eq (include "coffre.regulatorMode" .) "sidecar") }}
{{- end }}

{{/*
Where the vault finds the files of the Secrets it mounts (read-only, with fixed file names
whatever the Secret's keys are called).
*/}}
{{- define "coffre.paths.signing" -}}/etc/coffre/signing{{- end }}
{{- define "coffre.paths.trusted" -}}/etc/coffre/trusted{{- end }}
{{- define "coffre.paths.apiTls" -}}/etc/coffre/api-tls{{- end }}
{{- define "coffre.paths.clientCA" -}}/etc/coffre/api-client-ca{{- end }}
{{- define "coffre.paths.tokens" -}}/etc/coffre/api-tokens{{- end }}
{{- define "coffre.paths.tsaCerts" -}}/etc/coffre/tsa-certs{{- end }}
{{- define "coffre.paths.witnessCA" -}}/etc/coffre/witness-ca{{- end }}
{{- define "coffre.paths.witnessKeys" -}}/etc/coffre/witness-keys{{- end }}

{{/*
Checks the JSON schema cannot express (it sees one value at a time). Rendered by configmap.yaml,
so every `helm template`/`install` runs them.
*/}}
{{- define "coffre.validate" -}}
{{- $v := .Values }}
{{- include "coffre.validateKafka" . }}
{{- if le (float64 $v.terminationGracePeriodSeconds) (float64 $v.config.shutdownTimeoutSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed config.shutdownTimeoutSeconds (%v): Kubernetes would kill a service in the middle of its drain" $v.terminationGracePeriodSeconds $v.config.shutdownTimeoutSeconds) }}
{{- end }}
{{- if gt (int $v.vault.replicas) (int $v.kafka.partitions) }}
{{- fail (printf "vault.replicas (%v) must not exceed kafka.partitions (%v): each replica owns the partitions p with p %% replicas == ordinal" $v.vault.replicas $v.kafka.partitions) }}
{{- end }}
{{- if and (gt (int $v.vault.replicas) 1) (ne $v.archive.backend "s3") }}
{{- fail "vault.replicas > 1 needs archive.backend=s3: a local archive lives on one replica's volume" }}
{{- end }}
{{- if not $v.vault.signing.existingSecret }}
{{- if not $v.vault.signing.allowDevelopmentKey }}
{{- fail "vault.signing.existingSecret is empty: create a Secret with the signing key and certificate (kubectl create secret tls NAME --key … --cert …) and name it here, or set vault.signing.allowDevelopmentKey=true to let the vault sign with a generated DEVELOPMENT key (never in production)" }}
{{- end }}
{{- if gt (int $v.vault.replicas) 1 }}
{{- fail "the development signing key is generated per replica: with vault.replicas > 1 set vault.signing.existingSecret" }}
{{- end }}
{{- end }}
{{- with $v.vault.signing.trustedCerts }}
{{- if and .existingConfigMap .existingSecret }}
{{- fail "vault.signing.trustedCerts: set existingConfigMap or existingSecret, not both" }}
{{- end }}
{{- if and .files (not (or .existingConfigMap .existingSecret)) }}
{{- fail "vault.signing.trustedCerts.files needs existingConfigMap or existingSecret" }}
{{- end }}
{{- end }}
{{- if and $v.api.enabled (eq $v.archive.backend "s3") (not $v.vault.signing.existingSecret) }}
{{- fail "the regulator API signs export manifests with the vault's key: in s3 mode its own pods cannot read a development key on a vault's volume; set vault.signing.existingSecret" }}
{{- end }}
{{- if and $v.api.enabled (eq $v.archive.backend "s3") (not $v.api.tls.existingSecret) (gt (int $v.regulator.replicas) 1) }}
{{- fail "api.tls.allowDevelopmentCertificate with regulator.replicas > 1: each replica would make its own development certificate; set api.tls.existingSecret or regulator.replicas=1" }}
{{- end }}
{{- if and (eq $v.archive.backend "s3") (not $v.archive.s3.bucket) }}
{{- fail "archive.backend=s3 needs archive.s3.bucket" }}
{{- end }}
{{- if $v.api.enabled }}
{{- if and (not $v.api.tls.existingSecret) (not $v.api.tls.allowDevelopmentCertificate) }}
{{- fail "api.tls.existingSecret is empty: create a kubernetes.io/tls Secret with the regulator API's server certificate and name it here, set api.tls.allowDevelopmentCertificate=true (development only), or api.enabled=false" }}
{{- end }}
{{- if and $v.api.clientCA.existingSecret $v.api.clientCA.existingConfigMap }}
{{- fail "api.clientCA: set existingSecret or existingConfigMap, not both" }}
{{- end }}
{{- $ca := or $v.api.clientCA.existingSecret $v.api.clientCA.existingConfigMap }}
{{- if and (has $v.api.auth (list "mtls" "both")) (not $ca) }}
{{- fail (printf "api.auth=%s needs api.clientCA.existingSecret or api.clientCA.existingConfigMap (the CA client certificates chain to)" $v.api.auth) }}
{{- end }}
{{- if and (has $v.api.auth (list "token" "both")) (not $v.api.tokens.existingSecret) }}
{{- fail (printf "api.auth=%s needs api.tokens.existingSecret" $v.api.auth) }}
{{- end }}
{{- if and (eq $v.api.auth "either") (not $ca) (not $v.api.tokens.existingSecret) }}
{{- fail "api.auth=either needs api.clientCA and/or api.tokens: otherwise no request could authenticate" }}
{{- end }}
{{- end }}
{{- if and $v.tsa.urls (not $v.tsa.certsSecret) }}
{{- fail "tsa.urls needs tsa.certsSecret: the TSAs' trusted root certificates (COFFRE_TSA_CERTS), without which no token can be checked" }}
{{- end }}
{{- if and $v.tsa.urls (not $v.tsa.certsFiles) }}
{{- fail "tsa.certsFiles: name the keys of tsa.certsSecret that hold the TSAs' roots" }}
{{- end }}
{{- if and $v.witness.keysSecret (not $v.witness.keysFiles) }}
{{- fail "witness.keysFiles: name the keys of witness.keysSecret that hold the witnesses' public keys" }}
{{- end }}
{{- if and (or $v.witness.caSecret $v.witness.keysSecret) (not $v.witness.urls) }}
{{- fail "witness.caSecret and witness.keysSecret are for witness.urls, which is empty" }}
{{- end }}
{{- if and $v.networkPolicy.enabled $v.networkPolicy.egress.enabled }}
{{- if and $v.tsa.urls (not $v.networkPolicy.egress.tsa.cidrs) }}
{{- fail "networkPolicy.egress.tsa.cidrs: with tsa.urls give the TSAs' address ranges (or an egress proxy's), or set networkPolicy.egress.enabled=false" }}
{{- end }}
{{- if and $v.witness.urls (not (or $v.networkPolicy.egress.witness.cidrs $v.networkPolicy.egress.witness.namespaces)) }}
{{- fail "networkPolicy.egress.witness: with witness.urls give the witnesses' cidrs or namespaces, or set networkPolicy.egress.enabled=false" }}
{{- end }}
{{- if not (or $v.networkPolicy.egress.kafka.cidrs $v.networkPolicy.egress.kafka.namespaces) }}
{{- fail "networkPolicy.egress.kafka: give the brokers' cidrs or namespaces (every broker, not only the bootstrap ones), or set networkPolicy.egress.enabled=false" }}
{{- end }}
{{- if and (eq $v.archive.backend "s3") (not $v.networkPolicy.egress.s3.cidrs) }}
{{- fail "networkPolicy.egress.s3.cidrs: in s3 mode give the S3 endpoint's (and STS's, for IRSA) address ranges, or set networkPolicy.egress.enabled=false" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pod template's annotations: config checksums (pods roll when it changes) and scraping. */}}
{{- define "coffre.podAnnotations" -}}
{{- $ctx := .ctx }}
checksum/config: {{ include (print $ctx.Template.BasePath "/configmap.yaml") $ctx | sha256sum }}
{{- if include "coffre.usesKafka" . }}
checksum/kafka-config: {{ include (print $ctx.Template.BasePath "/kafka-configmap.yaml") $ctx | sha256sum }}
{{- end }}
{{- if has .component (list "vault" "regulator") }}
checksum/vault-config: {{ include (print $ctx.Template.BasePath "/vault-configmap.yaml") $ctx | sha256sum }}
{{- end }}
{{- if or (eq .component "regulator") (and (eq .component "vault") (include "coffre.regulatorMode" $ctx | eq "sidecar")) }}
checksum/regulator-config: {{ include (print $ctx.Template.BasePath "/regulator-configmap.yaml") $ctx | sha256sum }}
{{- end }}
{{- if $ctx.Values.metrics.podAnnotations }}
{{- /* One port per pod: the regulator sidecar's metrics (8081) are scraped by the ServiceMonitor. */}}
prometheus.io/scrape: "true"
prometheus.io/port: "8080"
prometheus.io/path: /metrics
{{- end }}
{{- with $ctx.Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "coffre.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end }}

{{/*
The pod spec of every service: non-root, read-only root filesystem, no service account token,
a writable /tmp, probes on the ops port, the shared ConfigMap. The vault adds its volumes,
mounts and ConfigMap, and in local mode the regulator API's container.
*/}}
{{- define "coffre.podSpec" -}}
{{- $ctx := .ctx }}
{{- $component := .component }}
{{- $values := index $ctx.Values $component }}
{{- $regulator := include "coffre.regulatorMode" $ctx }}
serviceAccountName: {{ include "coffre.serviceAccountName" . }}
# coffre never calls the Kubernetes API. (IRSA and workload identity inject their own token.)
automountServiceAccountToken: false
# No {SERVICE}_PORT variables: a Service named e.g. "coffre-api" would otherwise inject
# COFFRE_API_PORT=tcp://… into every pod, and coffre reads every COFFRE_* variable.
enableServiceLinks: false
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ $ctx.Values.podSecurityContext.runAsUser }}
  runAsGroup: {{ $ctx.Values.podSecurityContext.runAsGroup }}
  fsGroup: {{ $ctx.Values.podSecurityContext.fsGroup }}
  # Do not walk a large journal volume at every start once its ownership is right.
  fsGroupChangePolicy: OnRootMismatch
  seccompProfile:
    type: RuntimeDefault
# Longer than config.shutdownTimeoutSeconds: SIGTERM drains, fsyncs and commits first.
terminationGracePeriodSeconds: {{ $ctx.Values.terminationGracePeriodSeconds }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  {{- include "coffre.container" (dict "ctx" $ctx "component" $component) | trim | nindent 2 }}
  {{- if and (eq $component "vault") (eq $regulator "sidecar") }}
  {{- include "coffre.container" (dict "ctx" $ctx "component" "regulator") | trim | nindent 2 }}
  {{- end }}
volumes:
  # The only writable place besides the data volume (the root filesystem is read-only).
  - name: tmp
    emptyDir:
      sizeLimit: 256Mi
  {{- if eq $component "ingest" }}
  # Nothing durable: ingest's state is in Kafka (<topicPrefix>ingest.state).
  - name: data
    emptyDir:
      sizeLimit: 1Gi
  {{- end }}
  {{- if eq $component "auditor" }}
  # Nothing durable: the auditor's state is in Kafka (its table's changelog); faust's data folder.
  - name: data
    emptyDir:
      sizeLimit: 256Mi
  {{- end }}
  {{- if eq $component "regulator" }}
  # Export bundles being built, the access log and the development certificate, if any.
  - name: data
    emptyDir:
      sizeLimit: {{ $ctx.Values.regulator.dataSizeLimit }}
  {{- end }}
  {{- if include "coffre.usesKafka" . }}
  # Kafka: the brokers' CA, this service's own principal, the record keys (all read-only).
  {{- include "coffre.kafkaVolumes" . | trim | nindent 2 }}
  {{- end }}
  {{- if or (eq $component "vault") (eq $component "regulator") }}
  {{- include "coffre.secretVolumes" (dict "ctx" $ctx "api" (or (eq $component "regulator") (eq $regulator "sidecar"))) | trim | nindent 2 }}
  {{- end }}
  {{- if eq $component "vault" }}
  {{- with include "coffre.evidenceVolumes" $ctx | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- end }}
{{- end }}

{{/*
One container of a service (component), or the regulator API's ("regulator"): beside the vault
in local mode, it reads the vault's volume read-only and writes only in its folder "regulator".
*/}}
{{- define "coffre.container" -}}
{{- $ctx := .ctx }}
{{- $component := .component }}
{{- $values := index $ctx.Values $component }}
{{- $sidecar := and (eq $component "regulator") (include "coffre.regulatorMode" $ctx | eq "sidecar") }}
{{- $ops := ternary "regulator-ops" "ops" $sidecar }}
- name: {{ $component }}
  image: {{ include "coffre.image" $ctx }}
  imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
  args: [{{ ternary "regulator-api" $component (eq $component "regulator") | quote }}]
  envFrom:
    - configMapRef:
        name: {{ include "coffre.fullname" $ctx }}-config
    {{- if include "coffre.usesKafka" . }}
    # How to reach Kafka, and the record keys' file (not for the regulator API: it never does).
    - configMapRef:
        name: {{ include "coffre.fullname" $ctx }}-kafka
    {{- end }}
    {{- if has $component (list "vault" "regulator") }}
    # The archive and the signing key: the vault writes the one, the regulator API reads it.
    - configMapRef:
        name: {{ include "coffre.fullname" $ctx }}-vault
    {{- end }}
    {{- if eq $component "regulator" }}
    - configMapRef:
        name: {{ include "coffre.fullname" $ctx }}-regulator
    {{- end }}
  {{- $env := list }}
  {{- if and (has $component (list "vault" "regulator")) (eq $ctx.Values.archive.backend "s3") $ctx.Values.archive.s3.credentials.existingSecret }}
  {{- $creds := $ctx.Values.archive.s3.credentials }}
  {{- $env = append $env (dict "name" "AWS_ACCESS_KEY_ID" "valueFrom" (dict "secretKeyRef" (dict "name" $creds.existingSecret "key" $creds.accessKeyIdKey))) }}
  {{- $env = append $env (dict "name" "AWS_SECRET_ACCESS_KEY" "valueFrom" (dict "secretKeyRef" (dict "name" $creds.existingSecret "key" $creds.secretAccessKeyKey))) }}
  {{- end }}
  {{- $index := $ctx.Values.api.console.postgresql }}
  {{- if and (eq $component "regulator") $index.existingSecret }}
  {{- /* The console's index in PostgreSQL: its URL holds a password, so it comes from a Secret. */}}
  {{- $env = append $env (dict "name" "COFFRE_CONSOLE_INDEX" "valueFrom" (dict "secretKeyRef" (dict "name" $index.existingSecret "key" $index.urlKey))) }}
  {{- end }}
  {{- if include "coffre.usesKafka" . }}
  {{- /* This service's own principal: its user name and the files of its password or certificate. */}}
  {{- $env = concat $env (include "coffre.kafkaEnv" . | fromJsonArray) }}
  {{- end }}
  {{- if eq $component "vault" }}
  {{- /* The TSAs and the witnesses: the vault's alone (the regulator API never asks them). */}}
  {{- $env = concat $env (include "coffre.evidenceEnv" $ctx | fromJsonArray) }}
  {{- end }}
  {{- $env = concat $env $ctx.Values.extraEnv }}
  {{- with $env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - name: {{ $ops }}
      containerPort: {{ ternary (include "coffre.regulatorOpsPort" $ctx | int) 8080 (eq $component "regulator") }}
      protocol: TCP
    {{- if eq $component "regulator" }}
    - name: api
      containerPort: 8443
      protocol: TCP
    {{- end }}
  startupProbe:
    {{- include "coffre.probe" (dict "path" "/healthz" "port" $ops "probe" $values.probes.startup) | nindent 4 }}
  livenessProbe:
    {{- include "coffre.probe" (dict "path" "/healthz" "port" $ops "probe" $values.probes.liveness) | nindent 4 }}
  readinessProbe:
    {{- include "coffre.probe" (dict "path" "/readyz" "port" $ops "probe" $values.probes.readiness) | nindent 4 }}
  resources:
    {{- toYaml $values.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ $ctx.Values.podSecurityContext.runAsUser }}
    runAsGroup: {{ $ctx.Values.podSecurityContext.runAsGroup }}
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    privileged: false
    capabilities:
      drop: [ALL]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- if has $component (list "ingest" "vault" "auditor") }}
    - name: data
      mountPath: {{ include "coffre.dataDir" $ctx }}
    {{- else if $sidecar }}
    # The vault's volume, read-only: the archive (COFFRE_ARCHIVE_DIR) and the vault's files.
    - name: data
      mountPath: {{ include "coffre.dataDir" $ctx }}
      readOnly: true
    # Its own folder on that volume, the only place it writes (COFFRE_DATA_DIR): not the archive.
    - name: data
      mountPath: {{ include "coffre.regulatorDir" $ctx }}
      subPath: regulator
    {{- else if eq $component "regulator" }}
    - name: data
      mountPath: {{ include "coffre.regulatorDir" $ctx }}
    {{- end }}
    {{- if include "coffre.usesKafka" . }}
    {{- include "coffre.kafkaMounts" . | trim | nindent 4 }}
    {{- end }}
    {{- if has $component (list "vault" "regulator") }}
    {{- include "coffre.secretMounts" (dict "ctx" $ctx "api" (eq $component "regulator")) | trim | nindent 4 }}
    {{- end }}
    {{- if eq $component "vault" }}
    {{- with include "coffre.evidenceMounts" $ctx | trim }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- end }}
{{- end }}

{{/*
The Secrets of the vault and of the regulator API, each mounted read-only with mode 0440 (owner
root, group fsGroup: the service's group reads them, nothing writes them). `items` gives fixed
file names. Called with (dict "ctx" $ "api" bool): the API's Secrets too.
*/}}
{{- define "coffre.secretVolumes" -}}
{{- $v := .ctx.Values }}
{{- with $v.vault.signing.existingSecret }}
- name: signing
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.vault.signing.keyKey | quote }}, path: signing-key.pem}
      - {key: {{ $v.vault.signing.certKey | quote }}, path: signing-cert.pem}
{{- end }}
{{- with $v.vault.signing.trustedCerts }}
{{- if .files }}
- name: trusted-certs
  {{- if .existingSecret }}
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288 # 0440
  {{- else }}
  configMap:
    name: {{ .existingConfigMap }}
    defaultMode: 288 # 0440
  {{- end }}
    items:
      {{- range .files }}
      - {key: {{ . | quote }}, path: {{ . | quote }}}
      {{- end }}
{{- end }}
{{- end }}
{{- if .api }}
{{- with $v.api.tls.existingSecret }}
- name: api-tls
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- end }}
{{- if $v.api.clientCA.existingSecret }}
- name: api-client-ca
  secret:
    secretName: {{ $v.api.clientCA.existingSecret }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.api.clientCA.key | quote }}, path: ca.crt}
{{- else if $v.api.clientCA.existingConfigMap }}
- name: api-client-ca
  configMap:
    name: {{ $v.api.clientCA.existingConfigMap }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.api.clientCA.key | quote }}, path: ca.crt}
{{- end }}
{{- with $v.api.tokens.existingSecret }}
- name: api-tokens
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.api.tokens.key | quote }}, path: tokens}
{{- end }}
{{- end }}
{{- end }}

{{- define "coffre.secretMounts" -}}
{{- $v := .ctx.Values }}
{{- if $v.vault.signing.existingSecret }}
- name: signing
  mountPath: {{ include "coffre.paths.signing" .ctx }}
  readOnly: true
{{- end }}
{{- if $v.vault.signing.trustedCerts.files }}
- name: trusted-certs
  mountPath: {{ include "coffre.paths.trusted" .ctx }}
  readOnly: true
{{- end }}
{{- if .api }}
{{- if $v.api.tls.existingSecret }}
- name: api-tls
  mountPath: {{ include "coffre.paths.apiTls" .ctx }}
  readOnly: true
{{- end }}
{{- if or $v.api.clientCA.existingSecret $v.api.clientCA.existingConfigMap }}
- name: api-client-ca
  mountPath: {{ include "coffre.paths.clientCA" .ctx }}
  readOnly: true
{{- end }}
{{- if $v.api.tokens.existingSecret }}
- name: api-tokens
  mountPath: {{ include "coffre.paths.tokens" .ctx }}
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/*
The vault's own env entries (a JSON list): its static group member name, the pod's name (a
restarted vault takes its partitions back without a rebalance: docs/operations.md, "Scaling and
failover"), and its TSAs and witnesses (docs/operations.md, "Timestamps and the witness"): their
settings, and the Secrets of their trusted roots and keys, read-only, 0440.
*/}}
{{- define "coffre.evidenceEnv" -}}
{{- $v := .Values }}
{{- $env := list (dict "name" "COFFRE_KAFKA_GROUP_INSTANCE_ID" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) }}
{{- if $v.tsa.urls }}
{{- $env = append $env (dict "name" "COFFRE_TSA_URLS" "value" (join "," $v.tsa.urls)) }}
{{- $paths := list }}
{{- range $v.tsa.certsFiles }}
{{- $paths = append $paths (printf "%s/%s" (include "coffre.paths.tsaCerts" $) .) }}
{{- end }}
{{- $env = append $env (dict "name" "COFFRE_TSA_CERTS" "value" (join "," $paths)) }}
{{- $env = append $env (dict "name" "COFFRE_TSA_TIMEOUT_SECONDS" "value" ($v.tsa.timeoutSeconds | toString)) }}
{{- end }}
{{- if $v.witness.urls }}
{{- $env = append $env (dict "name" "COFFRE_WITNESS_URLS" "value" (join "," $v.witness.urls)) }}
{{- if $v.witness.caSecret }}
{{- $env = append $env (dict "name" "COFFRE_WITNESS_CA" "value" (printf "%s/ca.crt" (include "coffre.paths.witnessCA" .))) }}
{{- end }}
{{- if $v.witness.keysSecret }}
{{- $paths := list }}
{{- range $v.witness.keysFiles }}
{{- $paths = append $paths (printf "%s/%s" (include "coffre.paths.witnessKeys" $) .) }}
{{- end }}
{{- $env = append $env (dict "name" "COFFRE_WITNESS_KEYS" "value" (join "," $paths)) }}
{{- end }}
{{- end }}
{{- if or $v.tsa.urls $v.witness.urls }}
{{- $env = append $env (dict "name" "COFFRE_EVIDENCE_MAX_RETRY_SECONDS" "value" ($v.evidence.maxRetrySeconds | toString)) }}
{{- end }}
{{- toJson $env }}
{{- end }}

{{- define "coffre.evidenceVolumes" -}}
{{- $v := .Values }}
{{- if $v.tsa.urls }}
- name: tsa-certs
  secret:
    secretName: {{ $v.tsa.certsSecret }}
    defaultMode: 288 # 0440
    items:
      {{- range $v.tsa.certsFiles }}
      - {key: {{ . | quote }}, path: {{ . | quote }}}
      {{- end }}
{{- end }}
{{- if and $v.witness.urls $v.witness.caSecret }}
- name: witness-ca
  secret:
    secretName: {{ $v.witness.caSecret }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.witness.caKey | quote }}, path: ca.crt}
{{- end }}
{{- if and $v.witness.urls $v.witness.keysSecret }}
- name: witness-keys
  secret:
    secretName: {{ $v.witness.keysSecret }}
    defaultMode: 288 # 0440
    items:
      {{- range $v.witness.keysFiles }}
      - {key: {{ . | quote }}, path: {{ . | quote }}}
      {{- end }}
{{- end }}
{{- end }}

{{- define "coffre.evidenceMounts" -}}
{{- $v := .Values }}
{{- if $v.tsa.urls }}
- name: tsa-certs
  mountPath: {{ include "coffre.paths.tsaCerts" . }}
  readOnly: true
{{- end }}
{{- if and $v.witness.urls $v.witness.caSecret }}
- name: witness-ca
  mountPath: {{ include "coffre.paths.witnessCA" . }}
  readOnly: true
{{- end }}
{{- if and $v.witness.urls $v.witness.keysSecret }}
- name: witness-keys
  mountPath: {{ include "coffre.paths.witnessKeys" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Egress rules of the NetworkPolicies: DNS, and the S3 archive (and STS, for IRSA). */}}
{{- define "coffre.egress.dns" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $np.egress.dns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml $np.egress.dns.podLabels | nindent 10 }}
    {{- range $np.egress.dns.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}

{{- define "coffre.egress.s3" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    {{- range $np.egress.s3.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- range $np.egress.s3.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end }}
