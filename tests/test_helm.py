"""The Helm chart (deploy/helm/coffre): lint, render, validate offline, and check what matters.

Helm comes from PyPI: helm-python-sdk ships no `helm` executable but Helm's Go SDK compiled into a
shared library (helm_python/lib/libhelm_c.so, Helm v4), bound with ctypes. `helm_python.lint` is
`helm lint`; `Chart.render` is `helm template` (it validates the values against values.schema.json
first, as `helm template` does). The tests skip when that package or its library is missing.

Every rendered manifest is validated against the Kubernetes 1.30 JSON schemas bundled in
kubernetes-validate (strict: unknown fields fail), without network; Strimzi's KafkaTopics and
KafkaUsers, which those schemas do not know, against tests/helm/strimzi-v1beta2.schema.json.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from coffre.config import Settings

from helm_charts import load, merged, named, of_kind, render_manifests

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "coffre"
MINIMAL = ROOT / "tests" / "helm" / "minimal.yaml"
STRIMZI_SCHEMA = ROOT / "tests" / "helm" / "strimzi-v1beta2.schema.json"
OPERATIONS = ROOT / "docs" / "operations.md"
S3 = CHART / "values-s3.yaml"
KUBERNETES = "1.30.0"
COMPONENTS = ("ingest", "vault", "acquittal", "auditor")
"""The workloads of every install; the regulator API is a Deployment of its own in s3 mode only
(with a local archive it is a container of the vault pods)."""
# Variables the chart may set that are not coffre's own: boto3's, from an existing Secret.
AWS_CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
# Kinds of CRDs the Kubernetes schemas do not know (the optional ServiceMonitor; Strimzi's, checked
# against tests/helm/strimzi-v1beta2.schema.json).
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "KafkaTopic", "KafkaUser"}
STRIMZI_KINDS = {"KafkaTopic", "KafkaUser"}
# The pod volumes of the services that talk to Kafka: the brokers' CA, the service's own principal,
# the record keys. Never mounted by the regulator API's container.
KAFKA_VOLUMES = {"kafka-ca", "kafka-client", "kafka-password", "kafka-oauth", "record-keys"}

Manifest = dict[str, Any]
Rendered = dict[str, list[Manifest]]  # value set -> its manifests


try:
    import helm_python as helm
except Exception as exc:  # not installed (ImportError), or its native library would not load
    pytest.skip(f"helm-python-sdk is not usable here: {exc}", allow_module_level=True)


# Every optional branch of the templates at once, so that they too are validated.
EVERYTHING = merged(
    load(MINIMAL),
    {
        "image": {"digest": "sha256:" + "a" * 64},
        "extraEnv": [{"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"}],
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "ingest": {"replicas": 4, "priorityClassName": "high"},
        "regulator": {
            "replicas": 3,
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/read"}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "coffre"}],
        },
        "vault": {
            "replicas": 2,
            "signing": {
                "trustedCerts": {"existingConfigMap": "coffre-old-certs", "files": ["vault-2025.pem"]}
            },
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "coffre"}],
        },
        "archive": {
            "backend": "s3",
            "s3": {
                "bucket": "coffre-archive",
                "endpointUrl": "https://minio.example.internal:9000",
                "credentials": {"existingSecret": "coffre-s3"},
            },
        },
        "api": {
            "auth": "both",
            "clientCA": {"existingConfigMap": "coffre-regulator-ca"},
            "allowedSubjects": ["CN=ANJ,O=ANJ,C=FR", "CN=Audit,O=ANJ,C=FR"],
            "service": {
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "loadBalancerSourceRanges": ["198.51.100.0/24"],
            },
        },
        "networkPolicy": {
            "api": {"allowedCIDRs": ["198.51.100.0/24"], "allowedNamespaces": ["regulator-gateway"]},
            "egress": {
                "dns": {"cidrs": ["169.254.20.10/32"]},
                "kafka": {"namespaces": ["kafka"]},
                "s3": {"cidrs": ["10.30.0.0/24"], "ports": [9000]},
            },
        },
    },
)

# Issue 21's settings (its plan's names): coffre/config.py gains them on the collector's branch.
# Until those are merged, the chart's variables are checked against this list instead.
EVIDENCE_SETTINGS = {
    "tsa_urls",
    "tsa_certs",
    "tsa_timeout_seconds",
    "witness_urls",
    "witness_ca",
    "witness_keys",
    "evidence_max_retry_seconds",
}
EVIDENCE_VARS = {f"COFFRE_{name.upper()}" for name in EVIDENCE_SETTINGS}
# The vault's metrics the alerts watch (the plan's names, exactly).
EVIDENCE_METRICS = {
    "coffre_checkpoint_untimestamped_age_seconds",
    "coffre_checkpoint_uncosigned_age_seconds",
    "coffre_evidence_failures_total",
}


def setting_names() -> set[str]:
    """COFFRE_* of every field of coffre.config.Settings (with issue 21's, before they are merged)."""
    fields = set(Settings.model_fields)
    if not fields & EVIDENCE_SETTINGS:
        fields |= EVIDENCE_SETTINGS
    return {f"COFFRE_{name.upper()}" for name in fields}


# Two TSAs (one named, one by its host) and a witness with its CA and public key, the alerts on,
# the vault's egress to them: issue 21's values in local mode.
EVIDENCE = merged(
    load(MINIMAL),
    {
        "tsa": {
            "urls": ["certigna=https://timestamp.certigna.example/tsa", "http://tsa.example.fr/rfc3161"],
            "certsSecret": "coffre-tsa-roots",
            "certsFiles": ["certigna-root.pem", "other-root.pem"],
            "timeoutSeconds": 7.5,
        },
        "witness": {
            "urls": ["witness.anj.example=https://witness.anj.example:8444"],
            "caSecret": "anj-witness-ca",
            "caKey": "anj-ca.pem",
            "keysSecret": "anj-witness-keys",
            "keysFiles": ["witness-2026.pem", "witness-2027.pem"],
        },
        "evidence": {"maxRetrySeconds": 120},
        "metrics": {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "prometheus"},
                "untimestampedAgeSeconds": 1800,
                "uncosignedAgeSeconds": 7200,
                "failuresForMinutes": 20,
            }
        },
        "networkPolicy": {
            "egress": {
                "tsa": {"cidrs": ["192.0.2.0/24", "203.0.113.8/32"], "ports": [443, 80]},
                "witness": {"cidrs": ["198.51.100.44/32"], "ports": [8444]},
            }
        },
    },
)

# Mutual TLS with certificates from existing Secrets (one of them encrypted), and an existing
# record keys Secret, in the value set that turns everything on.
EVERYTHING = merged(
    EVERYTHING,
    {
        "kafka": {
            "securityProtocol": "SSL",
            "tls": {"caSecret": "kafka-ca", "checkHostname": False},
            "principals": {
                component: {"certificate": {"existingSecret": f"kafka-{component}-tls"}}
                for component in COMPONENTS
            },
        },
        "recordKeys": {"existingSecret": "coffre-record-keys-2025"},
        # A TSA, and a witness in a namespace of this cluster whose TLS chains to the system store.
        "tsa": {"urls": ["https://tsa.example.fr/"], "certsSecret": "coffre-tsa-roots"},
        "witness": {"urls": ["w1=https://coffre-witness.witness.svc:8444"]},
        "networkPolicy": {
            "egress": {"tsa": {"cidrs": ["192.0.2.0/24"]}, "witness": {"namespaces": ["witness"]}}
        },
    },
)
EVERYTHING["kafka"]["principals"]["vault"]["certificate"]["keyPasswordKey"] = "key-password"

# A production cluster run by Strimzi: SASL_SSL with SCRAM-SHA-512, the chart's KafkaTopics and
# KafkaUsers (each service its own principal, its password in its KafkaUser's Secret).
STRIMZI = merged(
    load(MINIMAL),
    {
        "kafka": {"securityProtocol": "SASL_SSL", "sasl": {"mechanism": "SCRAM-SHA-512"}},
        "strimzi": {"enabled": True, "clusterName": "main"},
        "networkPolicy": {"egress": {"kafka": {"namespaces": ["kafka"], "ports": [9093]}}},
    },
)

VALUE_SETS = {
    "minimal": load(MINIMAL),
    "s3": load(S3),
    "everything": EVERYTHING,
    "strimzi": STRIMZI,
    "evidence": EVIDENCE,
}
ALL = sorted(VALUE_SETS)


@pytest.fixture(scope="module")
def chart() -> Any:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    return render_manifests(chart, values, name="coffre", namespace="coffre")


@pytest.fixture(scope="module")
def rendered(chart: Any) -> Rendered:
    return {name: render(chart, values) for name, values in VALUE_SETS.items()}


def workloads(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """component -> its Deployment or StatefulSet."""
    found = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            found[doc["metadata"]["labels"]["app.kubernetes.io/component"]] = doc
    s3 = named(docs, "ConfigMap", "coffre-vault")["data"]["COFFRE_ARCHIVE_BACKEND"] == "s3"
    assert set(found) == set(COMPONENTS) | ({"regulator"} if s3 else set())
    return found


def environment(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str | None]:
    """What the container's process sees: its ConfigMaps, then its env (valueFrom: None)."""
    env: dict[str, str | None] = {}
    for source in container.get("envFrom", []):
        env.update(named(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    for var in container.get("env", []):
        env[var["name"]] = var.get("value")
    return env


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return workload["spec"]["template"]["spec"]["containers"]


def container(workload: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """The container ``name`` of a workload (default: its component's own)."""
    name = name or workload["metadata"]["labels"]["app.kubernetes.io/component"]
    (found,) = [c for c in containers(workload) if c["name"] == name]
    return found


def every_container(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(component, workload, container) of every container of every workload."""
    return [(component, w, c) for component, w in workloads(docs).items() for c in containers(w)]


# --- helm lint, helm template, Kubernetes schemas ---------------------------------------


@pytest.mark.parametrize("values", ALL)
def test_helm_lint_is_clean(values: str) -> None:
    report = helm.lint(CHART, VALUE_SETS[values], strict=True, kube_version=f"v{KUBERNETES}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
    assert not problems and not report["errors"], report


@pytest.mark.parametrize("values", ALL)
def test_every_manifest_is_valid_for_kubernetes(rendered: Rendered, values: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    docs = rendered[values]
    assert docs
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")


def test_the_schema_is_draft_07_and_takes_the_example_values() -> None:
    import jsonschema

    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = load(CHART / "values.yaml")
    for values in VALUE_SETS.values():
        jsonschema.Draft7Validator(schema).validate(merged(defaults, values))


# --- what the manifests must say ----------------------------------------------------------


@pytest.mark.parametrize("values", ALL)
def test_no_secret_is_rendered_but_the_record_keys_the_chart_makes(rendered: Rendered, values: str) -> None:
    """Key material never goes through Helm: every Secret exists beforehand and is referenced.
    The one exception is the record keys' Secret, when no existing one is named: the chart makes it
    once (random, looked up and kept on later upgrades) and never deletes it."""
    docs = rendered[values]
    secrets = of_kind(docs, "Secret")
    existing = VALUE_SETS[values].get("recordKeys", {}).get("existingSecret")
    if existing:
        assert secrets == []
    else:
        (made,) = secrets
        assert made["metadata"]["name"] == "coffre-record-keys"
        assert made["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert set(made["data"]) == {"keys"}
        from coffre.domain.authenticity import RecordKeys

        (line,) = base64.b64decode(made["data"]["keys"]).decode().splitlines()
        keys = RecordKeys.parse(line)  # what the services will read: one key, 256 bits
        assert len(keys.keys) == 1 and len(keys.keys[0][1]) == 32
    for configmap in of_kind(docs, "ConfigMap"):
        dumped = yaml.safe_dump(configmap)
        assert "PRIVATE KEY" not in dumped and "PASSWORD:" not in dumped.replace("PASSWORD_FILE:", "")
        assert "COFFRE_RECORD_KEYS:" not in dumped and "COFFRE_KAFKA_SASL_PASSWORD:" not in dumped


@pytest.mark.parametrize("values", ALL)
def test_every_pod_is_locked_down(rendered: Rendered, values: str) -> None:
    for component, workload in workloads(rendered[values]).items():
        pod = workload["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, component
        assert pod["enableServiceLinks"] is False, component
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0 and pod["securityContext"]["runAsGroup"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        tmp = {v["name"]: v for v in pod["volumes"]}["tmp"]
        assert "emptyDir" in tmp
        for each in pod["containers"]:
            where = f"{component}/{each['name']}"
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(each["resources"][kind]), where
            security = each["securityContext"]
            assert security["runAsNonRoot"] is True and security["runAsUser"] > 0, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert security["seccompProfile"] == {"type": "RuntimeDefault"}, where
            # Every pod's ops port is 8080; the regulator API's beside the vault is 8081.
            ops, port = ("regulator-ops", 8081) if each["name"] != component else ("ops", 8080)
            ports = {p["name"]: p["containerPort"] for p in each["ports"]}
            assert ports[ops] == port, where
            for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz")):
                assert each[probe]["httpGet"] == {"path": path, "port": ops}, where
            assert each["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": ops}, where
            assert {"name": "tmp", "mountPath": "/tmp"} in each["volumeMounts"], where
            assert each["args"] == ["regulator-api" if each["name"] == "regulator" else component], where


@pytest.mark.parametrize("values", ALL)
def test_secret_volumes_are_mounted_read_only(rendered: Rendered, values: str) -> None:
    for component, workload in workloads(rendered[values]).items():
        pod = workload["spec"]["template"]["spec"]
        # Secrets, the ConfigMaps that stand for them (client CA, older certificates), and a
        # projected service-account token (Kafka's OAUTHBEARER).
        protected = {
            v["name"]: v.get("secret") or v.get("projected") or v["configMap"]
            for v in pod["volumes"]
            if "secret" in v
            or "projected" in v
            or ("configMap" in v and v["name"] in ("api-client-ca", "trusted-certs"))
        }
        for source in protected.values():
            assert source["defaultMode"] == 0o440
        for each in pod["containers"]:
            for mount in each["volumeMounts"]:
                if mount["name"] in protected:
                    assert mount.get("readOnly") is True, f"{component}: {mount}"
            if each["name"] == "regulator":  # the regulator API never talks to Kafka
                assert not KAFKA_VOLUMES & {m["name"] for m in each["volumeMounts"]}, component
        if component == "regulator":
            assert not KAFKA_VOLUMES & set(protected)
        elif component != "vault":
            assert set(protected) <= KAFKA_VOLUMES, component
            assert "record-keys" in protected, component
    vault = workloads(rendered[values])["vault"]["spec"]["template"]["spec"]
    assert "signing" in {v["name"] for v in vault["volumes"]}


def test_the_vault_is_a_statefulset_with_its_volumes_in_local_mode(
    rendered: Rendered,
) -> None:
    docs = rendered["minimal"]
    vault = workloads(docs)["vault"]
    assert vault["kind"] == "StatefulSet"
    (claim,) = vault["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert vault["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    env = environment(docs, container(vault))
    assert env["COFFRE_ARCHIVE_BACKEND"] == "local"
    assert {"name": "data", "mountPath": env["COFFRE_DATA_DIR"]} in container(vault)["volumeMounts"]
    assert int(env["COFFRE_VAULT_REPLICAS"]) == vault["spec"]["replicas"] == 1
    assert "COFFRE_VAULT_ORDINAL" not in env  # derived from the pod name
    assert named(docs, "Service", vault["spec"]["serviceName"])["spec"]["clusterIP"] == "None"


def test_the_vault_archives_to_s3_with_three_replicas(rendered: Rendered) -> None:
    docs = rendered["s3"]
    vault = workloads(docs)["vault"]
    env = environment(docs, container(vault))
    assert [c["name"] for c in containers(vault)] == ["vault"]  # the API is a Deployment of its own
    assert env["COFFRE_ARCHIVE_BACKEND"] == "s3"
    assert env["COFFRE_S3_BUCKET"]
    assert int(env["COFFRE_VAULT_REPLICAS"]) == vault["spec"]["replicas"] == 3
    assert int(env["COFFRE_PARTITIONS"]) % 3 == 0
    assert vault["spec"]["volumeClaimTemplates"]  # the journals stay on volumes
    assert vault["spec"]["podManagementPolicy"] == "Parallel"
    assert named(docs, "NetworkPolicy", "coffre-vault-s3")["spec"]["egress"]
    member = [var for var in container(vault)["env"] if var["name"] == "COFFRE_KAFKA_GROUP_INSTANCE_ID"]
    assert member == [  # each vault pod a static member of its group, under its own name
        {"name": "COFFRE_KAFKA_GROUP_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]


def test_static_s3_credentials_come_from_an_existing_secret(rendered: Rendered) -> None:
    found = workloads(rendered["everything"])
    for component in ("vault", "regulator"):  # the one writes the archive, the other reads it
        env = container(found[component])["env"]
        refs = {
            var["name"]: var["valueFrom"]["secretKeyRef"]
            for var in env
            if "secretKeyRef" in var.get("valueFrom", {})
        }
        assert set(refs) == AWS_CREDENTIALS, component
        assert {ref["name"] for ref in refs.values()} == {"coffre-s3"}, component
    for component in ("ingest", "acquittal"):
        assert "env" not in container(found[component]) or all(
            "valueFrom" not in var for var in container(found[component])["env"]
        )


@pytest.mark.parametrize("values", ALL)
def test_ingest_scales_out_without_a_volume(rendered: Rendered, values: str) -> None:
    """ingest's counters are in Kafka (<prefix>ingest.state): replicas, rolling updates that never
    leave fewer replicas than asked, no PersistentVolumeClaim, a budget of one available."""
    docs = rendered[values]
    ingest = workloads(docs)["ingest"]
    assert ingest["kind"] == "Deployment"
    assert ingest["spec"]["replicas"] >= 2
    assert ingest["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    pod = ingest["spec"]["template"]["spec"]
    assert all("persistentVolumeClaim" not in volume for volume in pod["volumes"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    env = environment(docs, container(ingest))
    assert "emptyDir" in volumes["data"]
    assert {"name": "data", "mountPath": env["COFFRE_DATA_DIR"]} in container(ingest)["volumeMounts"]
    claims = [doc["metadata"]["name"] for doc in of_kind(docs, "PersistentVolumeClaim")]
    assert claims == []  # the vault's volumes come from its StatefulSet's claim templates
    budget = named(docs, "PodDisruptionBudget", "coffre-ingest")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels(ingest).items()


@pytest.mark.parametrize("values", ALL)
def test_the_auditor_is_a_deployment_of_its_own_with_its_state_in_kafka(
    rendered: Rendered, values: str
) -> None:
    """coffre auditor in its own pods (its own consumer group: an acquittal never waits for it), its
    own ServiceAccount, no volume but an emptyDir for faust's data folder, Kafka reachable under
    the egress policy, its ops port open to the metrics scraper."""
    docs = rendered[values]
    auditor = workloads(docs)["auditor"]
    assert auditor["kind"] == "Deployment" and auditor["spec"]["replicas"] == 1
    main = container(auditor)
    assert main["args"] == ["auditor"]
    assert {"name": "ops", "containerPort": 8080, "protocol": "TCP"} in main["ports"]
    pod = auditor["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(volumes) - KAFKA_VOLUMES == {"tmp", "data"} and "emptyDir" in volumes["data"]
    env = environment(docs, main)
    assert {"name": "data", "mountPath": env["COFFRE_DATA_DIR"]} in main["volumeMounts"]
    assert "COFFRE_ARCHIVE_BACKEND" not in env and "COFFRE_SIGNING_KEY" not in env  # no vault secrets
    account = named(docs, "ServiceAccount", pod["serviceAccountName"])
    assert account["metadata"]["labels"]["app.kubernetes.io/component"] == "auditor"
    labels = pod_labels(auditor)
    for policy in of_kind(docs, "NetworkPolicy"):
        spec = policy["spec"]
        selector = spec["podSelector"]
        if not selector.get("matchLabels", {}).items() <= labels.items():
            continue
        excluded = [e for e in selector.get("matchExpressions", []) if e["operator"] == "NotIn"]
        if any(labels.get(e["key"]) in e["values"] for e in excluded):
            continue
        if policy["metadata"]["name"] == "coffre-egress":
            ports = {p["port"] for rule in spec["egress"] for p in rule.get("ports", [])}
            in_force = merged(load(CHART / "values.yaml"), VALUE_SETS[values])
            assert set(in_force["networkPolicy"]["egress"]["kafka"]["ports"]) <= ports
            break
    else:
        raise AssertionError("no egress policy lets the auditor reach Kafka")


def test_one_ingest_gets_no_disruption_budget(chart: Any) -> None:
    docs = render(chart, merged(VALUE_SETS["minimal"], {"ingest": {"replicas": 1}}))
    assert workloads(docs)["ingest"]["spec"]["replicas"] == 1
    budgets = {pdb["metadata"]["name"] for pdb in of_kind(docs, "PodDisruptionBudget")}
    assert budgets == {"coffre-vault", "coffre-acquittal", "coffre-auditor"}


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"]["labels"]


# --- the regulator API: a sidecar reading the vault's volume, or a Deployment reading S3 -------


def test_the_regulator_api_is_a_sidecar_of_the_vault_reading_the_archive_read_only(
    rendered: Rendered,
) -> None:
    docs = rendered["minimal"]
    vault = workloads(docs)["vault"]
    assert [c["name"] for c in containers(vault)] == ["vault", "regulator"]
    sidecar = container(vault, "regulator")
    assert sidecar["args"] == ["regulator-api"]
    env = environment(docs, sidecar)
    ports = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert ports == {"regulator-ops": 8081, "api": 8443}
    assert env["COFFRE_OPS_PORT"] == "8081" and env["COFFRE_API_PORT"] == "8443"
    # The vault's volume: read-only where the archive is; writable only in its own folder, which
    # the archive is not in.
    archive, data_dir = env["COFFRE_ARCHIVE_DIR"], env["COFFRE_DATA_DIR"]
    mounts = [m for m in sidecar["volumeMounts"] if m["name"] == "data"]
    holding = [m for m in mounts if archive.startswith(m["mountPath"].rstrip("/") + "/")]
    assert holding and all(m.get("readOnly") is True and "subPath" not in m for m in holding)
    writable = [m for m in mounts if not m.get("readOnly")]
    assert writable == [{"name": "data", "mountPath": data_dir, "subPath": "regulator"}]
    assert not archive.startswith(data_dir.rstrip("/") + "/")
    assert archive == environment(docs, container(vault))["COFFRE_DATA_DIR"] + "/archive"  # the vault's
    # The vault itself no longer serves the API.
    assert [p["name"] for p in container(vault)["ports"]] == ["ops"]
    assert not any(name.startswith("COFFRE_API_") for name in environment(docs, container(vault)))


@pytest.mark.parametrize("values", ["s3", "everything"])
def test_the_regulator_api_is_a_deployment_of_its_own_in_s3_mode(rendered: Rendered, values: str) -> None:
    docs = rendered[values]
    regulator = workloads(docs)["regulator"]
    assert regulator["kind"] == "Deployment"
    assert regulator["spec"]["replicas"] == VALUE_SETS[values]["regulator"]["replicas"] >= 2
    assert regulator["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    (only,) = containers(regulator)
    env = environment(docs, only)
    assert only["args"] == ["regulator-api"]
    assert env["COFFRE_ARCHIVE_BACKEND"] == "s3" and env["COFFRE_S3_BUCKET"]
    assert "COFFRE_ARCHIVE_DIR" not in env and env["COFFRE_OPS_PORT"] == "8080"
    pod = regulator["spec"]["template"]["spec"]
    assert all("persistentVolumeClaim" not in volume for volume in pod["volumes"])
    assert {v["name"]: v for v in pod["volumes"]}["data"]["emptyDir"]["sizeLimit"]
    assert pod["serviceAccountName"] == "coffre-regulator"
    account = named(docs, "ServiceAccount", "coffre-regulator")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith("read")
    budget = named(docs, "PodDisruptionBudget", "coffre-regulator")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels(regulator).items()
    # Its NetworkPolicies: in on 8443 only (and ops), out to DNS and S3 only, not Kafka.
    policies = {np["metadata"]["name"]: np["spec"] for np in of_kind(docs, "NetworkPolicy")}
    selects = [
        name
        for name, spec in policies.items()
        if spec["podSelector"].get("matchLabels", {}).items() <= pod_labels(regulator).items()
        and all(
            pod_labels(regulator).get(e["key"]) not in e["values"]
            for e in spec["podSelector"].get("matchExpressions", [])
        )
    ]
    assert sorted(selects) == ["coffre-api", "coffre-default-deny", "coffre-ops", "coffre-regulator-egress"]
    assert policies["coffre-api"]["ingress"][0]["ports"] == [{"port": "api", "protocol": "TCP"}]
    out = {p["port"] for rule in policies["coffre-regulator-egress"]["egress"] for p in rule["ports"]}
    assert out == {53} | set(VALUE_SETS[values]["networkPolicy"]["egress"]["s3"]["ports"])


@pytest.mark.parametrize("values", ["minimal", "s3"])
def test_every_service_has_a_disruption_budget(rendered: Rendered, values: str) -> None:
    docs = rendered[values]
    budgets = {
        pdb["metadata"]["labels"]["app.kubernetes.io/component"]: pdb
        for pdb in of_kind(docs, "PodDisruptionBudget")
    }
    assert set(budgets) == set(workloads(docs))
    for component, workload in workloads(docs).items():
        pods = workload["spec"]["template"]["metadata"]["labels"]
        selector = budgets[component]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pods.items(), component
    assert budgets["ingest"]["spec"]["minAvailable"] == 1
    assert budgets["vault"]["spec"]["maxUnavailable"] == 1
    assert budgets["acquittal"]["spec"]["minAvailable"] == 1
    assert budgets["auditor"]["spec"]["maxUnavailable"] == 1  # one replica: a drain is never blocked
    if values == "s3":
        assert budgets["regulator"]["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("values", ["minimal", "s3"])
def test_network_policies_deny_by_default(rendered: Rendered, values: str) -> None:
    docs = rendered[values]
    policies = {np["metadata"]["name"]: np["spec"] for np in of_kind(docs, "NetworkPolicy")}
    deny = policies["coffre-default-deny"]
    assert deny["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in deny and "egress" not in deny
    for workload in workloads(docs).values():
        assert (
            deny["podSelector"]["matchLabels"].items()
            <= workload["spec"]["template"]["metadata"]["labels"].items()
        )
    egress_ports = {p["port"] for rule in policies["coffre-egress"]["egress"] for p in rule["ports"]}
    assert {53, 9092} <= egress_ports
    if values == "s3":
        assert policies["coffre-ops"]["ingress"][0]["ports"] == [{"port": "ops", "protocol": "TCP"}]
        api = policies["coffre-api"]
        assert api["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "regulator"
        assert api["ingress"][0]["ports"] == [{"port": "api", "protocol": "TCP"}]
        # Kafka is for the services that use it: not the regulator API's pods.
        assert policies["coffre-egress"]["podSelector"]["matchExpressions"] == [
            {"key": "app.kubernetes.io/component", "operator": "NotIn", "values": ["regulator"]}
        ]
    else:
        assert policies["coffre-ops"]["ingress"][0]["ports"] == [
            {"port": "ops", "protocol": "TCP"},
            {"port": "regulator-ops", "protocol": "TCP"},  # the regulator API beside the vault
        ]
        assert "coffre-api" not in policies  # nobody may reach the API until told who


@pytest.mark.parametrize("values", ["minimal", "s3"])
def test_the_api_service_reaches_the_regulator_api_on_8443(rendered: Rendered, values: str) -> None:
    """Local archive: the vault pods, whose regulator container has the port; s3: the Deployment."""
    docs = rendered[values]
    service = named(docs, "Service", "coffre-api")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    found = workloads(docs)
    workload = found["vault" if values == "minimal" else "regulator"]
    for other in set(found) - {"vault" if values == "minimal" else "regulator"}:
        assert not service["spec"]["selector"].items() <= pod_labels(found[other]).items(), other
    assert service["spec"]["selector"].items() <= pod_labels(workload).items()
    (serving,) = [c for c in containers(workload) if port["targetPort"] in {p["name"] for p in c["ports"]}]
    assert serving["name"] == "regulator" and serving["args"] == ["regulator-api"]
    assert {p["name"]: p["containerPort"] for p in serving["ports"]}[port["targetPort"]] == 8443
    assert environment(docs, serving)["COFFRE_API_PORT"] == "8443"


@pytest.mark.parametrize("values", ALL)
def test_the_grace_period_outlasts_the_drain(rendered: Rendered, values: str) -> None:
    docs = rendered[values]
    for component, workload, each in every_container(docs):
        env = environment(docs, each)
        grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > float(env["COFFRE_SHUTDOWN_TIMEOUT_SECONDS"]), (component, each["name"])


def test_pods_roll_when_their_configuration_changes(chart: Any) -> None:
    def checksums(values: dict[str, Any]) -> dict[str, dict[str, str]]:
        return {
            component: {
                key: value
                for key, value in workload["spec"]["template"]["metadata"]["annotations"].items()
                if key.startswith("checksum/")
            }
            for component, workload in workloads(render(chart, values)).items()
        }

    before = checksums(VALUE_SETS["minimal"])
    shared = checksums(merged(VALUE_SETS["minimal"], {"config": {"logLevel": "DEBUG"}}))
    vault_only = checksums(merged(VALUE_SETS["minimal"], {"vault": {"lot": {"maxEvents": 10}}}))
    api_only = checksums(merged(VALUE_SETS["minimal"], {"api": {"maxRangeDays": 31}}))
    assert all(before[c] != shared[c] for c in COMPONENTS)
    assert before["vault"] != vault_only["vault"]
    assert before["ingest"] == vault_only["ingest"] and before["acquittal"] == vault_only["acquittal"]
    assert before["vault"] != api_only["vault"]  # its pods hold the regulator API's container
    assert before["ingest"] == api_only["ingest"] and before["acquittal"] == api_only["acquittal"]
    s3 = merged(VALUE_SETS["s3"], {})
    before, api_only = checksums(s3), checksums(merged(s3, {"api": {"maxRangeDays": 31}}))
    assert before["regulator"] != api_only["regulator"] and before["vault"] == api_only["vault"]


# --- the chart cannot drift from coffre/config.py -----------------------------------------


@pytest.mark.parametrize("values", ALL)
def test_every_variable_the_chart_sets_is_a_setting(rendered: Rendered, values: str) -> None:
    settings = setting_names()
    extra = {var["name"] for var in VALUE_SETS[values].get("extraEnv", [])}
    docs = rendered[values]
    for component, _, each in every_container(docs):
        for name in environment(docs, each):
            if name.startswith("COFFRE_"):
                assert name in settings, f"{component}: {name} is not a field of coffre.config.Settings"
            else:
                assert name in AWS_CREDENTIALS | extra, f"{component}: {name}"


@pytest.mark.parametrize("values", ALL)
def test_settings_accept_the_rendered_configuration(
    rendered: Rendered, values: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = rendered[values]
    for component, workload, each in every_container(docs):
        with monkeypatch.context() as patch:
            for name in [name for name in os.environ if name.startswith("COFFRE_")]:
                patch.delenv(name)
            for name, value in environment(docs, each).items():
                if value is not None and name.startswith("COFFRE_"):
                    patch.setenv(name, value)
            settings = Settings()
        where = f"{component}/{each['name']}"
        sidecar = each["name"] != component
        assert settings.http_host == "0.0.0.0" and settings.ops_port == (8081 if sidecar else 8080), where
        assert settings.log_format == "json", where
        if each["name"] == "regulator":
            assert str(settings.data_dir) == "/var/lib/coffre-regulator", where
            assert settings.signing_key is not None and settings.api_tls_cert is not None, where
            assert settings.api_host == "0.0.0.0" and settings.api_port == 8443, where
            assert (settings.archive_backend == "local") == sidecar, where
            if sidecar:
                assert str(settings.archive_root) == "/var/lib/coffre/archive", where
        else:
            assert str(settings.data_dir) == "/var/lib/coffre", where
        if component == "vault" and not sidecar:
            assert settings.vault_replicas == workload["spec"]["replicas"]
            assert settings.signing_key is not None


# --- Kafka: a secured cluster, one principal per service, the record keys, Strimzi ---------

# Strimzi with mutual TLS: each service presents its KafkaUser's certificate.
STRIMZI_TLS = merged(
    STRIMZI,
    {"kafka": {"securityProtocol": "SSL", "sasl": {"mechanism": ""}}, "strimzi": {"authentication": "tls"}},
)
# OAUTHBEARER: a projected token of each service's own ServiceAccount.
OAUTH = merged(
    load(MINIMAL),
    {
        "kafka": {
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "OAUTHBEARER", "oauthbearer": {"audience": "kafka.example.internal"}},
        }
    },
)
KAFKA_VALUE_SETS = {**VALUE_SETS, "strimzi-tls": STRIMZI_TLS, "oauth": OAUTH}


@pytest.fixture(scope="module")
def kafka_rendered(chart: Any, rendered: Rendered) -> Rendered:
    extra = {name: render(chart, KAFKA_VALUE_SETS[name]) for name in ("strimzi-tls", "oauth")}
    return {**rendered, **extra}


def mounted_file(workload: Manifest, each: dict[str, Any], path: str) -> tuple[Manifest, str]:
    """The pod volume that gives container ``each`` the file ``path``, and the Secret key it comes
    from ("serviceAccountToken" for a projected token); the mount must be read-only."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    for mount in each["volumeMounts"]:
        folder = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(folder):
            continue
        assert mount.get("readOnly") is True, mount
        volume, name = volumes[mount["name"]], path[len(folder) :]
        if "secret" in volume:
            (key,) = [item["key"] for item in volume["secret"]["items"] if item["path"] == name]
            return volume, key
        (source,) = volume["projected"]["sources"]
        assert source["serviceAccountToken"]["path"] == name
        return volume, "serviceAccountToken"
    raise AssertionError(f"{each['name']}: no mount holds {path}")


def strimzi(docs: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {doc["metadata"]["name"]: doc for doc in of_kind(docs, kind)}


def test_a_sasl_ssl_cluster_run_by_strimzi_renders(rendered: Rendered) -> None:
    """SASL_SSL with SCRAM-SHA-512 and the Strimzi resources: every service is told so, with the
    cluster's CA, and creates no topic (the KafkaTopics do). Validity: the tests above and below."""
    docs = rendered["strimzi"]
    assert len(of_kind(docs, "KafkaTopic")) == 8
    assert set(strimzi(docs, "KafkaUser")) == {f"coffre-{c}" for c in COMPONENTS} | {"coffre-platform"}
    for component, workload in workloads(docs).items():
        env = environment(docs, container(workload))
        if component not in COMPONENTS:
            continue
        assert env["COFFRE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", component
        assert env["COFFRE_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512", component
        assert env["COFFRE_KAFKA_SSL_CHECK_HOSTNAME"] == "true", component
        assert env["COFFRE_KAFKA_CREATE_TOPICS"] == "false", component
        volume, key = mounted_file(workload, container(workload), env["COFFRE_KAFKA_SSL_CA_FILE"])
        assert (volume["secret"]["secretName"], key) == ("main-cluster-ca-cert", "ca.crt")
    # Without Strimzi, coffre creates its topics unless told otherwise.
    plain = rendered["minimal"]
    for component in COMPONENTS:
        env = environment(plain, container(workloads(plain)[component]))
        assert (
            env["COFFRE_KAFKA_CREATE_TOPICS"] == "true"
            and env["COFFRE_KAFKA_SECURITY_PROTOCOL"] == "PLAINTEXT"
        )
        assert not any(name.startswith(("COFFRE_KAFKA_SSL", "COFFRE_KAFKA_SASL")) for name in env), component


@pytest.mark.parametrize("values", ["strimzi", "strimzi-tls", "oauth", "everything"])
def test_each_service_is_its_own_principal(kafka_rendered: Rendered, values: str) -> None:
    docs = kafka_rendered[values]
    users = strimzi(docs, "KafkaUser")
    identities = set()
    for component in COMPONENTS:
        workload = workloads(docs)[component]
        each = container(workload)
        env = environment(docs, each)
        if values == "strimzi":  # SCRAM: its user name, its password from its KafkaUser's Secret
            assert env["COFFRE_KAFKA_SASL_USERNAME"] == f"coffre-{component}"
            volume, key = mounted_file(workload, each, env["COFFRE_KAFKA_SASL_PASSWORD_FILE"])
            assert key == "password" and volume["secret"]["secretName"] in users
            identity = volume["secret"]["secretName"]
            assert identity == env["COFFRE_KAFKA_SASL_USERNAME"]
        elif values == "oauth":  # its own ServiceAccount's token
            volume, _ = mounted_file(workload, each, env["COFFRE_KAFKA_SASL_OAUTH_TOKEN_FILE"])
            (source,) = volume["projected"]["sources"]
            assert source["serviceAccountToken"]["audience"] == "kafka.example.internal"
            identity = workload["spec"]["template"]["spec"]["serviceAccountName"]
            assert "COFFRE_KAFKA_SASL_USERNAME" not in env
        else:  # mutual TLS: its own certificate (its KafkaUser's with Strimzi)
            cert, cert_key = mounted_file(workload, each, env["COFFRE_KAFKA_SSL_CERT_FILE"])
            key, key_key = mounted_file(workload, each, env["COFFRE_KAFKA_SSL_KEY_FILE"])
            assert cert is key
            identity = cert["secret"]["secretName"]
            if values == "strimzi-tls":
                assert identity == f"coffre-{component}" and identity in users
                assert (cert_key, key_key) == ("user.crt", "user.key")
            else:
                assert identity == f"kafka-{component}-tls" and (cert_key, key_key) == ("tls.crt", "tls.key")
            assert "COFFRE_KAFKA_SASL_USERNAME" not in env and "COFFRE_KAFKA_SASL_MECHANISM" not in env
            if component == "vault" and values == "everything":
                _, password = mounted_file(workload, each, env["COFFRE_KAFKA_SSL_KEY_PASSWORD_FILE"])
                assert password == "key-password"
        identities.add(identity)
    assert len(identities) == len(COMPONENTS)  # nobody shares a principal
    # The regulator API never talks to Kafka: none of it reaches its container.
    for component, _, each in every_container(docs):
        if each["name"] == "regulator":
            env = environment(docs, each)
            assert not [name for name in env if name.startswith(("COFFRE_KAFKA_", "COFFRE_RECORD_"))], (
                component
            )


@pytest.mark.parametrize("values", sorted(KAFKA_VALUE_SETS))
def test_kafka_secrets_are_mounted_files_never_values(kafka_rendered: Rendered, values: str) -> None:
    docs = kafka_rendered[values]
    for component in COMPONENTS:
        workload = workloads(docs)[component]
        each = container(workload)
        env = environment(docs, each)
        assert "COFFRE_KAFKA_SASL_PASSWORD" not in env and "COFFRE_RECORD_KEYS" not in env, component
        files = [
            name
            for name in env
            if name.startswith(("COFFRE_KAFKA_", "COFFRE_RECORD_")) and name.endswith("_FILE")
        ]
        assert "COFFRE_RECORD_KEYS_FILE" in files
        for name in files:
            volume, _ = mounted_file(workload, each, env[name])  # read-only, from a Secret or a token
            assert volume.get("secret", volume.get("projected"))["defaultMode"] == 0o440, name
        refs = [var for var in each.get("env", []) if "valueFrom" in var]
        assert {var["name"] for var in refs} <= AWS_CREDENTIALS | {"COFFRE_KAFKA_GROUP_INSTANCE_ID"}, (
            component
        )


@pytest.mark.parametrize("values", sorted(KAFKA_VALUE_SETS))
def test_the_record_keys_secret_is_shared_by_every_kafka_service(
    kafka_rendered: Rendered, values: str
) -> None:
    docs = kafka_rendered[values]
    sources = set()
    for component in COMPONENTS:
        workload = workloads(docs)[component]
        each = container(workload)
        volume, key = mounted_file(workload, each, environment(docs, each)["COFFRE_RECORD_KEYS_FILE"])
        sources.add((volume["secret"]["secretName"], key))
    existing = KAFKA_VALUE_SETS[values].get("recordKeys", {}).get("existingSecret")
    assert sources == {(existing or "coffre-record-keys", "keys")}
    made = [secret["metadata"]["name"] for secret in of_kind(docs, "Secret")]
    assert made == ([] if existing else ["coffre-record-keys"])


def test_pods_roll_when_kafka_settings_change(chart: Any) -> None:
    def checksums(values: dict[str, Any]) -> dict[str, str]:
        return {
            component: workload["spec"]["template"]["metadata"]["annotations"].get(
                "checksum/kafka-config", ""
            )
            for component, workload in workloads(render(chart, values)).items()
        }

    before = checksums(VALUE_SETS["s3"])
    after = checksums(merged(VALUE_SETS["s3"], {"kafka": {"createTopics": False}}))
    assert all(before[c] and before[c] != after[c] for c in COMPONENTS)
    assert before["regulator"] == after["regulator"] == ""  # it has no Kafka settings


@pytest.mark.parametrize("values", ["strimzi", "strimzi-tls"])
def test_strimzi_resources_match_what_strimzi_accepts(kafka_rendered: Rendered, values: str) -> None:
    import jsonschema

    schema = json.loads(STRIMZI_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)

    def validator(kind: str) -> Any:
        return jsonschema.Draft7Validator({**schema, "$ref": f"#/definitions/{kind}"})

    found = [doc for doc in kafka_rendered[values] if doc["kind"] in STRIMZI_KINDS]
    assert {doc["kind"] for doc in found} == STRIMZI_KINDS
    for doc in found:
        errors = [e.message for e in validator(doc["kind"]).iter_errors(doc)]
        assert not errors, (doc["kind"], doc["metadata"]["name"], errors)
        assert doc["metadata"]["labels"]["strimzi.io/cluster"] == "main"
    # The schema is strict: what Strimzi would refuse, it refuses.
    user = copy.deepcopy(next(doc for doc in found if doc["kind"] == "KafkaUser"))
    user["spec"]["authorization"]["acls"][0]["operations"] = ["Raed"]
    assert list(validator("KafkaUser").iter_errors(user))
    topic = copy.deepcopy(next(doc for doc in found if doc["kind"] == "KafkaTopic"))
    topic["spec"]["retention"] = "7d"
    assert list(validator("KafkaTopic").iter_errors(topic))


def documented_acls(prefix: str) -> set[tuple[str, str, str, str, frozenset[str]]]:
    """docs/operations.md's ACL table: (principal, resource type, name, pattern type, operations)."""
    text = OPERATIONS.read_text(encoding="utf-8")
    table = text.split("### Who may do what", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(
        r"^\| `([a-z0-9.-]+)` \| (topic|group)s?( prefixed)? `([^`]+)` \| ([A-Za-z, ]+) \|",
        table,
        re.MULTILINE,
    )
    assert len(rows) >= 20, rows
    return {
        (
            user,
            kind,
            name.replace("<prefix>", prefix),
            "prefix" if prefixed else "literal",
            frozenset(ops.split(", ")),
        )
        for user, kind, prefixed, name, ops in rows
    }


@pytest.mark.parametrize("authentication", ["scram-sha-512", "tls"])
def test_the_strimzi_acls_are_the_documented_table(chart: Any, authentication: str) -> None:
    """The KafkaUsers grant exactly the table of docs/operations.md, whatever the topic prefix, each
    KafkaUser named as its row's principal: with ``tls`` users too, whose principal on the brokers is
    ``CN=<KafkaUser name>`` (Strimzi's certificate, and the User Operator writes the ACLs for it), as
    docs/operations.md says under the table."""
    prefix = "acme.coffre."
    values = STRIMZI if authentication == "scram-sha-512" else STRIMZI_TLS
    docs = render(chart, merged(values, {"kafka": {"topicPrefix": prefix}}))
    rendered_acls = set()
    for name, user in strimzi(docs, "KafkaUser").items():
        assert user["spec"]["authentication"] == {"type": authentication}
        assert user["spec"]["authorization"]["type"] == "simple"
        for acl in user["spec"]["authorization"]["acls"]:
            assert acl.get("type", "allow") == "allow" and acl["host"] == "*"
            resource = acl["resource"]
            rendered_acls.add(
                (
                    name,
                    resource["type"],
                    resource["name"],
                    resource["patternType"],
                    frozenset(acl["operations"]),
                )
            )
    assert rendered_acls == documented_acls(prefix)
    # Quotas: a platform's produce rate is capped, coffre's own principals are not.
    users = strimzi(docs, "KafkaUser")
    assert users["coffre-platform"]["spec"]["quotas"]["producerByteRate"] > 0
    assert all("quotas" not in users[f"coffre-{c}"]["spec"] for c in COMPONENTS)
    # Nobody but acquittal may write acquittals, nobody but ingest the normalized topic.
    writers = {
        acl[2]: {u for u, _, n, _, ops in rendered_acls if n == acl[2] and "Write" in ops}
        for acl in rendered_acls
    }
    assert writers[f"{prefix}acquittals"] == {"coffre-acquittal"}
    assert writers[f"{prefix}events.normalized"] == {"coffre-ingest"}
    assert writers[f"{prefix}receipts"] == {"coffre-vault"}


def documented_topic_settings() -> dict[str, dict[str, str]]:
    """docs/operations.md's retention table: topic (without the prefix) -> its Kafka settings."""
    text = OPERATIONS.read_text(encoding="utf-8")
    table = text.split("### Topics and their retention", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `<prefix>([a-z.-]+)` \| ([^|]+) \|", table, re.MULTILINE)
    return {topic: dict(re.findall(r"`([a-z.]+)=([^`]+)`", cell)) for topic, cell in rows}


def test_the_strimzi_topics_are_coffres_with_the_documented_settings(rendered: Rendered) -> None:
    from coffre_auditor.app import changelog_topic

    settings = Settings(topic_prefix="coffre.")
    topics = {doc["spec"]["topicName"]: doc["spec"] for doc in of_kind(rendered["strimzi"], "KafkaTopic")}
    assert set(topics) == set(settings.topics.all()) | {changelog_topic(settings)}
    documented = documented_topic_settings()
    assert {f"coffre.{name}" for name in documented} == set(topics)
    for name, spec in topics.items():
        assert spec["partitions"] == 6 and spec["replicas"] == 3, name
        config = spec["config"]
        assert config["min.insync.replicas"] == 2 and config["unclean.leader.election.enable"] is False, name
        assert config["max.message.bytes"] >= settings.max_message_bytes, name
        if name == settings.topics.events_in:  # the largest input with its headers
            assert config["max.message.bytes"] == settings.events_in_record_bytes
        changelog = name == changelog_topic(settings)
        assert config["cleanup.policy"] == ("compact" if changelog else "delete"), name
        for key, value in documented[name.removeprefix("coffre.")].items():
            assert str(config.get(key)) == value, (name, key)
    kept = {
        doc["metadata"]["annotations"]["helm.sh/resource-policy"]
        for doc in of_kind(rendered["strimzi"], "KafkaTopic")
    }
    assert kept == {"keep"}  # helm uninstall must not delete the topics, ingest's counters among them


# --- values the chart must refuse ---------------------------------------------------------

REFUSED = {
    "no Kafka bootstrap": ({"kafka": {"bootstrapServers": None}}, "bootstrapServers"),
    "a malformed bootstrap": ({"kafka": {"bootstrapServers": "kafka, other:9092"}}, "bootstrapServers"),
    "three vaults on local volumes": ({"vault": {"replicas": 3}}, "/archive/backend"),
    "no ingest": ({"ingest": {"replicas": 0}}, "/ingest/replicas"),
    "an ingest volume": ({"ingest": {"persistence": {"size": "10Gi"}}}, "persistence"),
    "the regulator API in s3 mode with the vault's development key": (
        {
            "vault": {"signing": {"existingSecret": None, "allowDevelopmentKey": True}},
            "archive": {"backend": "s3", "s3": {"bucket": "b-1"}},
            "networkPolicy": {"egress": {"s3": {"cidrs": ["10.0.0.0/8"]}}},
        },
        "signs export manifests with the vault's key",
    ),
    "a development API certificate per regulator replica": (
        {
            "api": {"tls": {"existingSecret": None, "allowDevelopmentCertificate": True}},
            "archive": {"backend": "s3", "s3": {"bucket": "b-1"}},
            "networkPolicy": {"egress": {"s3": {"cidrs": ["10.0.0.0/8"]}}},
        },
        "each replica would make its own development certificate",
    ),
    "an unknown api.auth": ({"api": {"auth": "basic"}}, "/api/auth"),
    "a container without limits": ({"vault": {"resources": {"limits": None}}}, "limits"),
    "a root user": ({"podSecurityContext": {"runAsUser": 0}}, "runAsUser"),
    "no signing key": ({"vault": {"signing": {"existingSecret": None}}}, "allowDevelopmentKey"),
    "a grace period within the drain": ({"terminationGracePeriodSeconds": 8}, "must exceed"),
    "more vaults than partitions": (
        {
            "vault": {"replicas": 4},
            "kafka": {"partitions": 3},
            "archive": {"backend": "s3", "s3": {"bucket": "b-1"}},
        },
        "kafka.partitions",
    ),
    "s3 without a bucket": ({"archive": {"backend": "s3"}}, "bucket"),
    "mtls without a client CA": ({"api": {"auth": "mtls"}}, "api.clientCA"),
    "egress with no Kafka destination": (
        {"networkPolicy": {"egress": {"kafka": {"cidrs": None}}}},
        "egress.kafka",
    ),
    "no API certificate": ({"api": {"tls": {"existingSecret": None}}}, "api.tls"),
    "an unknown security protocol": ({"kafka": {"securityProtocol": "TLS"}}, "securityProtocol"),
    "SASL without a mechanism": ({"kafka": {"securityProtocol": "SASL_SSL"}}, "needs kafka.sasl.mechanism"),
    "a mechanism in plaintext": ({"kafka": {"sasl": {"mechanism": "PLAIN"}}}, "needs kafka.securityProtocol"),
    "SCRAM without a password": (
        {"kafka": {"securityProtocol": "SASL_SSL", "sasl": {"mechanism": "SCRAM-SHA-256"}}},
        "kafka.principals.ingest.password.existingSecret",
    ),
    "a Kafka CA in plaintext": ({"kafka": {"tls": {"caSecret": "kafka-ca"}}}, "connect in the clear"),
    "a client certificate in plaintext": (
        {"kafka": {"principals": {"vault": {"certificate": {"existingSecret": "v"}}}}},
        "kafka.principals.vault.certificate",
    ),
    "Strimzi without its cluster": (
        merged(STRIMZI, {"strimzi": {"clusterName": ""}}),
        "strimzi.clusterName",
    ),
    "Strimzi with coffre creating topics": (
        merged(STRIMZI, {"kafka": {"createTopics": True}}),
        "no Create ACL",
    ),
    "Strimzi SCRAM users over mutual TLS": (
        merged(STRIMZI, {"kafka": {"securityProtocol": "SSL", "sasl": {"mechanism": ""}}}),
        "strimzi.authentication=scram-sha-512",
    ),
    "Strimzi TLS users over SASL": (
        merged(STRIMZI, {"strimzi": {"authentication": "tls"}}),
        "needs kafka.securityProtocol=SSL",
    ),
    "two services as one principal": (
        merged(STRIMZI, {"kafka": {"principals": {"vault": {"username": "coffre-ingest"}}}}),
        "a user of its own",
    ),
    "a user name Strimzi cannot take": (
        merged(STRIMZI, {"kafka": {"principals": {"auditor": {"username": "Coffre_Auditor"}}}}),
        "must be a Kubernetes name",
    ),
    "min.insync.replicas as high as the replicas": (
        merged(STRIMZI, {"strimzi": {"topics": {"minInsyncReplicas": 3}}}),
        "minInsyncReplicas",
    ),
    "TSAs without their roots": ({"tsa": {"urls": ["https://tsa.example.fr/"]}}, "tsa.certsSecret"),
    "TSA roots without their files": (
        {"tsa": {"urls": ["https://tsa.example.fr/"], "certsSecret": "r", "certsFiles": []}},
        "tsa.certsFiles",
    ),
    "a TSA that is no URL": ({"tsa": {"urls": ["tsa.example.fr"]}}, "/tsa/urls/0"),
    "two TSAs in one string": ({"tsa": {"urls": ["https://a.example/,https://b.example/"]}}, "/tsa/urls/0"),
    "a TSA timeout of zero": ({"tsa": {"timeoutSeconds": 0}}, "/tsa/timeoutSeconds"),
    "a witness without its name": ({"witness": {"urls": ["https://w.example:8444"]}}, "/witness/urls/0"),
    "a witness over plain HTTP": ({"witness": {"urls": ["w=http://w.example:8444"]}}, "/witness/urls/0"),
    "a witness name in capitals": ({"witness": {"urls": ["ANJ=https://w.example:8444"]}}, "/witness/urls/0"),
    "witness keys without their files": (
        {"witness": {"urls": ["w=https://w.example"], "keysSecret": "k"}},
        "witness.keysFiles",
    ),
    "a witness CA without a witness": ({"witness": {"caSecret": "ca"}}, "witness.urls"),
    "TSAs out of the egress policy's reach": (
        {"tsa": {"urls": ["https://tsa.example.fr/"], "certsSecret": "r"}},
        "networkPolicy.egress.tsa.cidrs",
    ),
    "a witness out of the egress policy's reach": (
        {"witness": {"urls": ["w=https://w.example:8444"]}},
        "networkPolicy.egress.witness",
    ),
    "an alert threshold of seconds": (
        {"metrics": {"prometheusRule": {"untimestampedAgeSeconds": 5}}},
        "untimestampedAgeSeconds",
    ),
    "an unknown evidence value": ({"evidence": {"maxRetry": 5}}, "maxRetry"),
    "an unknown value": ({"vault": {"replica": 2}}, "replica"),
    "an unknown topic's config": (
        merged(STRIMZI, {"strimzi": {"topics": {"config": {"events.out": {"retention.ms": 1}}}}}),
        "events.out",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_chart_refuses(chart: Any, case: str) -> None:
    override, fragment = REFUSED[case]
    with pytest.raises(helm.HelmError) as refused:
        chart.render(merged(VALUE_SETS["minimal"], override), name="coffre", namespace="coffre")
    assert fragment in str(refused.value)


def test_the_defaults_alone_are_refused(chart: Any) -> None:
    with pytest.raises(helm.HelmValuesError, match="bootstrapServers"):
        chart.render({}, name="coffre", namespace="coffre")


def test_a_development_key_only_when_chosen(chart: Any) -> None:
    values = merged(
        VALUE_SETS["minimal"],
        {
            "vault": {"signing": {"existingSecret": None, "allowDevelopmentKey": True}},
            "api": {"tls": {"existingSecret": None, "allowDevelopmentCertificate": True}},
        },
    )
    manifests = chart.render(values, name="coffre", namespace="coffre")
    assert "DEVELOPMENT key" in manifests["coffre/templates/NOTES.txt"]
    docs = render(chart, values)
    vault = workloads(docs)["vault"]
    env = environment(docs, container(vault))
    assert "COFFRE_SIGNING_KEY" not in env and "COFFRE_API_TLS_CERT" not in env
    # The regulator API beside it signs export manifests with that key, read from the vault's volume.
    api = environment(docs, container(vault, "regulator"))
    assert api["COFFRE_SIGNING_KEY"] == env["COFFRE_DATA_DIR"] + "/keys/signing-key.pem"
    assert "COFFRE_API_TLS_CERT" not in api
    assert not any(
        "secret" in v
        for v in vault["spec"]["template"]["spec"]["volumes"]
        if v["name"] not in {"api-tokens"} | KAFKA_VOLUMES
    )
    # ...and never with several replicas: each would sign with its own key.
    several = merged(
        values, {"vault": {"replicas": 2}, "archive": {"backend": "s3", "s3": {"bucket": "b-1"}}}
    )
    several = merged(several, {"networkPolicy": {"egress": {"s3": {"cidrs": ["10.0.0.0/8"]}}}})
    with pytest.raises(helm.HelmError, match="per replica"):
        chart.render(several, name="coffre", namespace="coffre")


# --- the image the chart runs ---------------------------------------------------------------


def test_the_dockerfile_fits_the_chart() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    defaults = load(CHART / "values.yaml")
    user = defaults["podSecurityContext"]["runAsUser"]
    assert re.search(
        rf"^USER {user}:{defaults['podSecurityContext']['runAsGroup']}$", dockerfile, re.MULTILINE
    )
    assert re.search(r"^EXPOSE 8080 8443$", dockerfile, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["coffre"\]$', dockerfile, re.MULTILINE)
    assert re.search(r"^FROM python:3\.11-slim", dockerfile, re.MULTILINE)


@pytest.mark.parametrize("values", ["minimal", "s3"])
def test_without_the_api_there_is_no_regulator_anywhere(chart: Any, values: str) -> None:
    docs = render(chart, merged(VALUE_SETS[values], {"api": {"enabled": False}}))
    assert set(workloads_of(docs)) == set(COMPONENTS)
    assert [c["name"] for c in containers(workloads_of(docs)["vault"])] == ["vault"]
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    for absent in (
        ("Service", "coffre-api"),
        ("ConfigMap", "coffre-regulator"),
        ("NetworkPolicy", "coffre-api"),
    ):
        assert absent not in names
    assert not any(doc["kind"] == "NetworkPolicy" and "regulator" in doc["metadata"]["name"] for doc in docs)


def workloads_of(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["labels"]["app.kubernetes.io/component"]: doc
        for doc in docs
        if doc["kind"] in ("Deployment", "StatefulSet")
    }


# --- issue 21: the vault's TSAs and witnesses, their egress, the alerts ----------------------

EVIDENCE_MOUNTS = {"tsa-certs", "witness-ca", "witness-keys"}


def source_of(workload: dict[str, Any], each: dict[str, Any], path: str) -> tuple[str, str, str]:
    """(kind, name, key) of the Secret or ConfigMap item a container sees at ``path``."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    for mount in each["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        assert mount.get("readOnly") is True, mount
        volume = volumes[mount["name"]]
        kind = "secret" if "secret" in volume else "configMap"
        source = volume[kind]
        (key,) = [i["key"] for i in source["items"] if i["path"] == path.removeprefix(prefix)]
        return kind, source.get("secretName") or source["name"], key
    raise AssertionError(f"nothing is mounted at {path}")


@pytest.mark.parametrize("values", ["evidence", "everything"])
def test_the_tsas_and_witnesses_are_the_vaults_alone(rendered: Rendered, values: str) -> None:
    """COFFRE_TSA_*, COFFRE_WITNESS_* and COFFRE_EVIDENCE_* in the vault's container only (not the
    regulator API's, beside it or in its own pods), each file from the Secret and key the values
    name, mounted read-only."""
    docs = rendered[values]
    in_force = merged(load(CHART / "values.yaml"), VALUE_SETS[values])
    tsa, witness = in_force["tsa"], in_force["witness"]
    vault = workloads(docs)["vault"]
    main = container(vault)
    env = environment(docs, main)
    assert env["COFFRE_TSA_URLS"] == ",".join(tsa["urls"])
    assert float(env["COFFRE_TSA_TIMEOUT_SECONDS"]) == tsa["timeoutSeconds"]
    roots = env["COFFRE_TSA_CERTS"].split(",")
    assert [source_of(vault, main, path) for path in roots] == [
        ("secret", tsa["certsSecret"], key) for key in tsa["certsFiles"]
    ]
    assert env["COFFRE_WITNESS_URLS"] == ",".join(witness["urls"])
    assert float(env["COFFRE_EVIDENCE_MAX_RETRY_SECONDS"]) == in_force["evidence"]["maxRetrySeconds"]
    if witness["caSecret"]:
        ca = source_of(vault, main, env["COFFRE_WITNESS_CA"])
        assert ca == ("secret", witness["caSecret"], witness["caKey"])
    else:
        assert "COFFRE_WITNESS_CA" not in env  # the system trust store
    if witness["keysSecret"]:
        keys = [source_of(vault, main, path) for path in env["COFFRE_WITNESS_KEYS"].split(",")]
        assert keys == [("secret", witness["keysSecret"], key) for key in witness["keysFiles"]]
    else:
        assert "COFFRE_WITNESS_KEYS" not in env
    for component, workload, each in every_container(docs):
        if (component, each["name"]) == ("vault", "vault"):
            continue
        where = f"{component}/{each['name']}"
        assert not EVIDENCE_VARS & set(environment(docs, each)), where
        assert not EVIDENCE_MOUNTS & {m["name"] for m in each["volumeMounts"]}, where
        if component != "vault":
            volumes = {v["name"] for v in workload["spec"]["template"]["spec"]["volumes"]}
            assert not EVIDENCE_MOUNTS & volumes, where


def test_without_tsas_or_witnesses_the_vault_asks_nobody(rendered: Rendered) -> None:
    docs = rendered["minimal"]
    for component, workload, each in every_container(docs):
        assert not EVIDENCE_VARS & set(environment(docs, each)), component
        volumes = {v["name"] for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert not EVIDENCE_MOUNTS & volumes, component
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    assert ("NetworkPolicy", "coffre-vault-evidence") not in names
    assert not of_kind(docs, "PrometheusRule")  # metrics.prometheusRule.enabled is off by default


@pytest.mark.parametrize("values", ["evidence", "everything"])
def test_the_vault_alone_may_reach_its_tsas_and_witnesses(rendered: Rendered, values: str) -> None:
    docs = rendered[values]
    in_force = merged(load(CHART / "values.yaml"), VALUE_SETS[values])["networkPolicy"]["egress"]
    policy = named(docs, "NetworkPolicy", "coffre-vault-evidence")["spec"]
    assert policy["policyTypes"] == ["Egress"]
    selector = policy["podSelector"]["matchLabels"]
    for component, workload in workloads(docs).items():
        assert (selector.items() <= pod_labels(workload).items()) == (component == "vault"), component
    tsa_rule, witness_rule = policy["egress"]
    assert tsa_rule["to"] == [{"ipBlock": {"cidr": cidr}} for cidr in in_force["tsa"]["cidrs"]]
    assert [p["port"] for p in tsa_rule["ports"]] == in_force["tsa"]["ports"]
    assert witness_rule["to"] == [{"ipBlock": {"cidr": cidr}} for cidr in in_force["witness"]["cidrs"]] + [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
        for ns in in_force["witness"]["namespaces"]
    ]
    assert [p["port"] for p in witness_rule["ports"]] == in_force["witness"]["ports"]
    assert all(p["protocol"] == "TCP" for rule in policy["egress"] for p in rule["ports"])


def test_a_witness_alone_opens_only_the_witness(chart: Any) -> None:
    values = merged(
        VALUE_SETS["minimal"],
        {
            "witness": {"urls": ["w=https://w.example:8444"]},
            "networkPolicy": {"egress": {"witness": {"cidrs": ["198.51.100.44/32"]}}},
        },
    )
    docs = render(chart, values)
    (rule,) = named(docs, "NetworkPolicy", "coffre-vault-evidence")["spec"]["egress"]
    assert rule["ports"] == [{"port": 8444, "protocol": "TCP"}]
    env = environment(docs, container(workloads(docs)["vault"]))
    assert {name for name in env if name in EVIDENCE_VARS} == {
        "COFFRE_WITNESS_URLS",
        "COFFRE_EVIDENCE_MAX_RETRY_SECONDS",
    }
    # Without an egress policy, no cidrs are needed.
    values = merged(values, {"networkPolicy": {"egress": {"enabled": False, "witness": {"cidrs": []}}}})
    docs = render(chart, values)
    assert ("NetworkPolicy", "coffre-vault-evidence") not in {
        (doc["kind"], doc["metadata"]["name"]) for doc in docs
    }


def test_the_alerts_watch_the_plans_metrics_with_the_values_thresholds(rendered: Rendered) -> None:
    (rule,) = of_kind(rendered["evidence"], "PrometheusRule")
    settings = EVIDENCE["metrics"]["prometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = {a["alert"]: a for group in rule["spec"]["groups"] for a in group["rules"]}
    assert set(alerts) == {
        "CoffreCheckpointsUntimestamped",
        "CoffreCheckpointsUncosigned",
        "CoffreEvidenceFailures",
        "CoffreConsoleIndexRefused",
        "CoffreConsoleIndexLate",
    }
    used = {name for a in alerts.values() for name in re.findall(r"\bcoffre_[a-z_]+", a["expr"])}
    assert used == EVIDENCE_METRICS | {
        "coffre_console_index_refused_coffres",
        "coffre_console_index_lag_seconds",
    }
    untimestamped = alerts["CoffreCheckpointsUntimestamped"]["expr"]
    assert re.search(r"\(coffre_checkpoint_untimestamped_age_seconds\) > 1800$", untimestamped)
    assert "tsa" in untimestamped.split("by (", 1)[1].split(")", 1)[0]
    uncosigned = alerts["CoffreCheckpointsUncosigned"]["expr"]
    assert re.search(r"\(coffre_checkpoint_uncosigned_age_seconds\) > 7200$", uncosigned)
    assert "witness" in uncosigned.split("by (", 1)[1].split(")", 1)[0]
    failures = alerts["CoffreEvidenceFailures"]
    assert re.search(r"increase\(coffre_evidence_failures_total\[[0-9]+m\]\)\) > 0$", failures["expr"])
    assert failures["for"] == f"{settings['failuresForMinutes']}m"
    for alert in alerts.values():
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        # Prometheus's own templating survives Helm's.
        assert "{{ $labels." in alert["annotations"]["summary"]
    try:  # once the collector's coffre/metrics.py is merged, the names must be its own
        metrics_source = (ROOT / "coffre" / "metrics.py").read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    if "coffre_evidence_failures" in metrics_source or "evidence_failures" in metrics_source:
        for name in EVIDENCE_METRICS:
            assert name.removeprefix("coffre_").removesuffix("_total") in metrics_source, name


def test_the_consoles_postgresql_index_url_comes_from_a_secret(chart: Any) -> None:
    """issue 32: the index's URL holds a password: the regulator API alone gets it, from a Secret."""
    values = merged(
        VALUE_SETS["s3"], {"api": {"console": {"postgresql": {"existingSecret": "coffre-index"}}}}
    )
    found = workloads(render(chart, values))
    refs = [var for var in container(found["regulator"])["env"] if var["name"] == "COFFRE_CONSOLE_INDEX"]
    assert refs == [
        {
            "name": "COFFRE_CONSOLE_INDEX",
            "valueFrom": {"secretKeyRef": {"name": "coffre-index", "key": "url"}},
        }
    ]
    for component, workload in found.items():
        if component != "regulator":
            assert all(var["name"] != "COFFRE_CONSOLE_INDEX" for var in container(workload).get("env", []))
    plain = workloads(render(chart, VALUE_SETS["s3"]))["regulator"]
    assert all(var["name"] != "COFFRE_CONSOLE_INDEX" for var in container(plain).get("env", []))
