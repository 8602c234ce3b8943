{{/*
Kafka security (TLS, SASL, one principal per service), the record keys, and the Strimzi resources'
ACL table. Templates that take a component are called with (dict "ctx" $ "component" "ingest|…").
*/}}

{{/* The services that talk to Kafka, hence get its security settings and the record keys. */}}
{{- define "coffre.kafkaComponents" -}}ingest vault acquittal auditor{{- end }}

{{- define "coffre.usesKafka" -}}
{{- if has .component (splitList " " (include "coffre.kafkaComponents" .ctx)) }}true{{ end }}
{{- end }}

{{/* Where the services find the Kafka files (read-only mounts, fixed file names). */}}
{{- define "coffre.paths.kafkaCA" -}}/etc/coffre/kafka-ca{{- end }}
{{- define "coffre.paths.kafkaClient" -}}/etc/coffre/kafka-client{{- end }}
{{- define "coffre.paths.kafkaPassword" -}}/etc/coffre/kafka-password{{- end }}
{{- define "coffre.paths.kafkaToken" -}}/etc/coffre/kafka-oauth{{- end }}
{{- define "coffre.paths.recordKeys" -}}/etc/coffre/record-keys{{- end }}

{{- define "coffre.kafka.tls" -}}
{{- if has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") }}true{{ end }}
{{- end }}

{{- define "coffre.kafka.sasl" -}}
{{- if has .Values.kafka.securityProtocol (list "SASL_PLAINTEXT" "SASL_SSL") }}true{{ end }}
{{- end }}

{{/* PLAIN and SCRAM log in with a user name and a password. */}}
{{- define "coffre.kafka.password" -}}
{{- if and (include "coffre.kafka.sasl" .) (has .Values.kafka.sasl.mechanism (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512")) }}true{{ end }}
{{- end }}

{{- define "coffre.kafka.oauth" -}}
{{- if and (include "coffre.kafka.sasl" .) (eq .Values.kafka.sasl.mechanism "OAUTHBEARER") }}true{{ end }}
{{- end }}

{{/* COFFRE_KAFKA_CREATE_TOPICS: as set, or (null) false when Strimzi's KafkaTopics make them. */}}
{{- define "coffre.kafka.createTopics" -}}
{{- if kindIs "bool" .Values.kafka.createTopics }}{{ .Values.kafka.createTopics }}{{ else }}{{ not .Values.strimzi.enabled }}{{ end }}
{{- end }}

{{/* The Secret holding the brokers' CA (ca.crt), or "" for the system trust store. */}}
{{- define "coffre.kafka.caSecret" -}}
{{- if include "coffre.kafka.tls" . }}
{{- if .Values.kafka.tls.caSecret }}{{ .Values.kafka.tls.caSecret }}
{{- else if .Values.strimzi.enabled }}{{ printf "%s-cluster-ca-cert" .Values.strimzi.clusterName }}
{{- end }}
{{- end }}
{{- end }}

{{/* A service's password Secret (PLAIN, SCRAM): as given, or its KafkaUser's, or "". */}}
{{- define "coffre.kafka.passwordSecret" -}}
{{- $principal := index .ctx.Values.kafka.principals .component }}
{{- if include "coffre.kafka.password" .ctx }}
{{- if $principal.password.existingSecret }}{{ $principal.password.existingSecret }}
{{- else if and .ctx.Values.strimzi.enabled (eq .ctx.Values.strimzi.authentication "scram-sha-512") }}{{ $principal.username }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A service's client certificate for mutual TLS, as JSON {"name", "certKey", "keyKey", "keyPasswordKey"}
("name" empty: none): as given, or its KafkaUser's Secret with strimzi.authentication=tls.
*/}}
{{- define "coffre.kafka.certificate" -}}
{{- $principal := index .ctx.Values.kafka.principals .component }}
{{- $found := dict "name" "" }}
{{- if include "coffre.kafka.tls" .ctx }}
{{- with $principal.certificate }}
{{- if .existingSecret }}
{{- $found = dict "name" .existingSecret "certKey" .certKey "keyKey" .keyKey "keyPasswordKey" .keyPasswordKey }}
{{- else if and $.ctx.Values.strimzi.enabled (eq $.ctx.Values.strimzi.authentication "tls") }}
{{- $found = dict "name" $principal.username "certKey" "user.crt" "keyKey" "user.key" "keyPasswordKey" "" }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $found }}
{{- end }}

{{- define "coffre.recordKeysSecret" -}}
{{- default (printf "%s-record-keys" (include "coffre.fullname" .)) .Values.recordKeys.existingSecret }}
{{- end }}

{{/* The environment of one Kafka service's container: its own principal's files. */}}
{{- define "coffre.kafkaEnv" -}}
{{- $ctx := .ctx }}
{{- $env := list }}
{{- if include "coffre.kafka.password" $ctx }}
{{- $env = append $env (dict "name" "COFFRE_KAFKA_SASL_USERNAME" "value" (index $ctx.Values.kafka.principals .component).username) }}
{{- $env = append $env (dict "name" "COFFRE_KAFKA_SASL_PASSWORD_FILE" "value" (printf "%s/password" (include "coffre.paths.kafkaPassword" $ctx))) }}
{{- end }}
{{- $cert := include "coffre.kafka.certificate" . | fromJson }}
{{- if $cert.name }}
{{- $dir := include "coffre.paths.kafkaClient" $ctx }}
{{- $env = append $env (dict "name" "COFFRE_KAFKA_SSL_CERT_FILE" "value" (printf "%s/tls.crt" $dir)) }}
{{- $env = append $env (dict "name" "COFFRE_KAFKA_SSL_KEY_FILE" "value" (printf "%s/tls.key" $dir)) }}
{{- if $cert.keyPasswordKey }}
{{- $env = append $env (dict "name" "COFFRE_KAFKA_SSL_KEY_PASSWORD_FILE" "value" (printf "%s/key-password" $dir)) }}
{{- end }}
{{- end }}
{{- toJson $env }}
{{- end }}

{{/* The volumes of one Kafka service's pod: the brokers' CA, its principal's files, the record keys. */}}
{{- define "coffre.kafkaVolumes" -}}
{{- $ctx := .ctx }}
{{- $v := $ctx.Values }}
{{- with include "coffre.kafka.caSecret" $ctx }}
- name: kafka-ca
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.kafka.tls.caKey | quote }}, path: ca.crt}
{{- end }}
{{- $cert := include "coffre.kafka.certificate" . | fromJson }}
{{- if $cert.name }}
- name: kafka-client
  secret:
    secretName: {{ $cert.name }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $cert.certKey | quote }}, path: tls.crt}
      - {key: {{ $cert.keyKey | quote }}, path: tls.key}
      {{- with $cert.keyPasswordKey }}
      - {key: {{ . | quote }}, path: key-password}
      {{- end }}
{{- end }}
{{- with include "coffre.kafka.passwordSecret" . }}
- name: kafka-password
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ (index $v.kafka.principals $.component).password.key | quote }}, path: password}
{{- end }}
{{- if include "coffre.kafka.oauth" $ctx }}
{{- with $v.kafka.sasl.oauthbearer }}
- name: kafka-oauth
  {{- if .existingSecret }}
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ .key | quote }}, path: token}
  {{- else }}
  # The service's own ServiceAccount token for the brokers' audience, renewed by the kubelet.
  projected:
    defaultMode: 288 # 0440
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: {{ .expirationSeconds | int }}
          {{- with .audience }}
          audience: {{ . | quote }}
          {{- end }}
  {{- end }}
{{- end }}
{{- end }}
- name: record-keys
  secret:
    secretName: {{ include "coffre.recordKeysSecret" $ctx }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ $v.recordKeys.key | quote }}, path: keys}
{{- end }}

{{- define "coffre.kafkaMounts" -}}
{{- $ctx := .ctx }}
{{- if include "coffre.kafka.caSecret" $ctx }}
- name: kafka-ca
  mountPath: {{ include "coffre.paths.kafkaCA" $ctx }}
  readOnly: true
{{- end }}
{{- if (include "coffre.kafka.certificate" . | fromJson).name }}
- name: kafka-client
  mountPath: {{ include "coffre.paths.kafkaClient" $ctx }}
  readOnly: true
{{- end }}
{{- if include "coffre.kafka.passwordSecret" . }}
- name: kafka-password
  mountPath: {{ include "coffre.paths.kafkaPassword" $ctx }}
  readOnly: true
{{- end }}
{{- if include "coffre.kafka.oauth" $ctx }}
- name: kafka-oauth
  mountPath: {{ include "coffre.paths.kafkaToken" $ctx }}
  readOnly: true
{{- end }}
- name: record-keys
  mountPath: {{ include "coffre.paths.recordKeys" $ctx }}
  readOnly: true
{{- end }}

{{/*
What each principal may do (docs/operations.md, "Who may do what": tests/test_helm.py compares the
two). As YAML: principal key -> list of {type, name, patternType, operations}; P is the topic prefix.
*/}}
{{- define "coffre.strimzi.acls" -}}
{{- $p := .Values.kafka.topicPrefix }}
ingest:
  - {type: topic, name: {{ $p | quote }}, patternType: prefix, operations: [Describe, DescribeConfigs]}
  - {type: topic, name: {{ printf "%sevents.in" $p | quote }}, patternType: literal, operations: [Read, Write, Describe]}
  - {type: topic, name: {{ printf "%sevents.normalized" $p | quote }}, patternType: literal, operations: [Write, Describe]}
  - {type: topic, name: {{ printf "%sevents.rejected" $p | quote }}, patternType: literal, operations: [Write, Describe]}
  - {type: topic, name: {{ printf "%singest.state" $p | quote }}, patternType: literal, operations: [Read, Write, Describe]}
  - {type: group, name: {{ printf "%singest" $p | quote }}, patternType: literal, operations: [Read]}
vault:
  - {type: topic, name: {{ $p | quote }}, patternType: prefix, operations: [Describe, DescribeConfigs]}
  - {type: topic, name: {{ printf "%sevents.normalized" $p | quote }}, patternType: literal, operations: [Read, Describe]}
  - {type: topic, name: {{ printf "%sreceipts" $p | quote }}, patternType: literal, operations: [Write, Describe]}
  - {type: group, name: {{ printf "%svault" $p | quote }}, patternType: literal, operations: [Read]}
acquittal:
  - {type: topic, name: {{ $p | quote }}, patternType: prefix, operations: [Describe, DescribeConfigs]}
  - {type: topic, name: {{ printf "%sreceipts" $p | quote }}, patternType: literal, operations: [Read, Describe]}
  - {type: topic, name: {{ printf "%sevents.rejected" $p | quote }}, patternType: literal, operations: [Read, Describe]}
  - {type: topic, name: {{ printf "%sacquittals" $p | quote }}, patternType: literal, operations: [Write, Describe]}
  - {type: group, name: {{ printf "%sacquittal" $p | quote }}, patternType: literal, operations: [Read]}
auditor:
  - {type: topic, name: {{ $p | quote }}, patternType: prefix, operations: [Describe, DescribeConfigs]}
  - {type: topic, name: {{ printf "%sevents.normalized" $p | quote }}, patternType: literal, operations: [Read, Describe]}
  - {type: topic, name: {{ printf "%sreceipts" $p | quote }}, patternType: literal, operations: [Read, Describe]}
  - {type: topic, name: {{ printf "%saudit" $p | quote }}, patternType: literal, operations: [Write, Describe]}
  - {type: topic, name: {{ printf "%sauditor-" $p | quote }}, patternType: prefix, operations: [Read, Write, Describe]}
  - {type: group, name: {{ printf "%sauditor" $p | quote }}, patternType: literal, operations: [Read]}
{{- end }}

{{/* A platform's ACLs: called with (dict "ctx" $ "platform" {name, groupPrefix, …}). */}}
{{- define "coffre.strimzi.platformAcls" -}}
{{- $p := .ctx.Values.kafka.topicPrefix }}
- {type: topic, name: {{ printf "%sevents.in" $p | quote }}, patternType: literal, operations: [Write, Describe]}
- {type: topic, name: {{ printf "%sacquittals" $p | quote }}, patternType: literal, operations: [Read, Describe]}
- {type: topic, name: {{ printf "%sevents.rejected" $p | quote }}, patternType: literal, operations: [Read, Describe]}
- {type: topic, name: {{ printf "%sreceipts" $p | quote }}, patternType: literal, operations: [Read, Describe]}
- {type: group, name: {{ .platform.groupPrefix | quote }}, patternType: prefix, operations: [Read]}
{{- end }}

{{/* coffre's topics (names without the prefix), the auditor's changelog last. */}}
{{- define "coffre.topicNames" -}}events.in events.normalized events.rejected receipts acquittals ingest.state audit auditor-state-changelog{{- end }}

{{/* Checks of the Kafka values the schema cannot express; called by coffre.validate. */}}
{{- define "coffre.validateKafka" -}}
{{- $v := .Values }}
{{- $sasl := include "coffre.kafka.sasl" . }}
{{- $mechanism := $v.kafka.sasl.mechanism }}
{{- if and $sasl (not $mechanism) }}
{{- fail (printf "kafka.securityProtocol=%s needs kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)" $v.kafka.securityProtocol) }}
{{- end }}
{{- if and (not $sasl) $mechanism }}
{{- fail (printf "kafka.sasl.mechanism=%s needs kafka.securityProtocol SASL_SSL (or SASL_PLAINTEXT)" $mechanism) }}
{{- end }}
{{- if not (include "coffre.kafka.tls" .) }}
{{- if $v.kafka.tls.caSecret }}
{{- fail (printf "kafka.tls.caSecret is set but kafka.securityProtocol=%s: coffre would connect in the clear; use SSL or SASL_SSL" $v.kafka.securityProtocol) }}
{{- end }}
{{- range $component, $principal := $v.kafka.principals }}
{{- if $principal.certificate.existingSecret }}
{{- fail (printf "kafka.principals.%s.certificate is set but kafka.securityProtocol=%s: a client certificate needs SSL or SASL_SSL" $component $v.kafka.securityProtocol) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.strimzi.enabled }}
{{- if not $v.strimzi.clusterName }}
{{- fail "strimzi.enabled needs strimzi.clusterName (the Kafka resource's name, for the strimzi.io/cluster label)" }}
{{- end }}
{{- if eq (include "coffre.kafka.createTopics" .) "true" }}
{{- fail "kafka.createTopics=true with strimzi.enabled: the chart's KafkaTopics create coffre's topics and its principals have no Create ACL; leave kafka.createTopics empty or false" }}
{{- end }}
{{- if and (eq $v.strimzi.authentication "scram-sha-512") (or (ne $v.kafka.securityProtocol "SASL_SSL") (ne $mechanism "SCRAM-SHA-512")) }}
{{- fail "strimzi.authentication=scram-sha-512 needs kafka.securityProtocol=SASL_SSL and kafka.sasl.mechanism=SCRAM-SHA-512" }}
{{- end }}
{{- if and (eq $v.strimzi.authentication "tls") (ne $v.kafka.securityProtocol "SSL") }}
{{- fail "strimzi.authentication=tls needs kafka.securityProtocol=SSL (the services present their KafkaUsers' certificates)" }}
{{- end }}
{{- $names := list }}
{{- range $component := splitList " " (include "coffre.kafkaComponents" .) }}
{{- $names = append $names (index $v.kafka.principals $component).username }}
{{- end }}
{{- range $v.strimzi.platforms }}
{{- $names = append $names .name }}
{{- end }}
{{- range $names }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" .) }}
{{- fail (printf "strimzi.enabled: the user %q must be a Kubernetes name (lower case letters, digits, '-', '.'): it is its KafkaUser's name" .) }}
{{- end }}
{{- end }}
{{- if ne (len $names) (len (uniq $names)) }}
{{- fail (printf "strimzi.enabled: every principal needs a user of its own, not %s" (join ", " $names)) }}
{{- end }}
{{- if or (gt (int $v.strimzi.topics.minInsyncReplicas) (int $v.kafka.replicationFactor)) (and (gt (int $v.kafka.replicationFactor) 1) (ge (int $v.strimzi.topics.minInsyncReplicas) (int $v.kafka.replicationFactor))) }}
{{- fail (printf "strimzi.topics.minInsyncReplicas (%v) must be below kafka.replicationFactor (%v): otherwise the loss of one broker stops every write" $v.strimzi.topics.minInsyncReplicas $v.kafka.replicationFactor) }}
{{- end }}
{{- end }}
{{- range $component := splitList " " (include "coffre.kafkaComponents" .) }}
{{- $principal := index $v.kafka.principals $component }}
{{- if include "coffre.kafka.password" $ }}
{{- if not $principal.username }}
{{- fail (printf "kafka.sasl.mechanism=%s needs kafka.principals.%s.username" $mechanism $component) }}
{{- end }}
{{- if not (include "coffre.kafka.passwordSecret" (dict "ctx" $ "component" $component)) }}
{{- fail (printf "kafka.sasl.mechanism=%s needs kafka.principals.%s.password.existingSecret (or strimzi.enabled with strimzi.authentication=scram-sha-512)" $mechanism $component) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
