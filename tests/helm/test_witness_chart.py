"""The regulator's chart (deploy/helm/coffre-witness): lint, render, validate offline, check the wiring.

Rendered with helm-python-sdk (Helm's Go SDK through ctypes) as tests/test_helm.py does; every
manifest validated against the Kubernetes 1.30 JSON schemas of kubernetes-validate (strict).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from coffre.config import Settings

from helm_charts import load, merged, named, of_kind, render_manifests

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "coffre-witness"
COFFRE_CHART = ROOT / "deploy" / "helm" / "coffre"
MINIMAL = ROOT / "tests" / "helm" / "witness.yaml"
KUBERNETES = "1.30.0"
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}
# The witness's settings (coffre/config.py): the chart sets every one of them.
WITNESS_SETTINGS = {
    "witness_name",
    "witness_key",
    "witness_state_dir",
    "witness_operator_certs",
    "witness_host",
    "witness_port",
    "witness_tls_cert",
    "witness_tls_key",
}

try:
    import helm_python as helm
except Exception as exc:  # not installed (ImportError), or its native library would not load
    pytest.skip(f"helm-python-sdk is not usable here: {exc}", allow_module_level=True)


# Every optional branch at once: operator certificates from a Secret, a LoadBalancer, the
# monitoring resources, a pinned image.
EVERYTHING = merged(
    load(MINIMAL),
    {
        "image": {"repository": "registry.anj.example/coffre", "digest": "sha256:" + "b" * 64},
        "witness": {
            "key": {"key": "anj-2026.pem"},
            "operatorCerts": {
                "existingConfigMap": "",
                "existingSecret": "coffre-operators",
                "files": ["operator-0099.pem", "operator-0123.pem"],
            },
        },
        "persistence": {"size": "5Gi", "storageClass": "ssd"},
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
        "service": {
            "type": "LoadBalancer",
            "externalTrafficPolicy": "Local",
            "loadBalancerSourceRanges": ["203.0.113.0/24"],
        },
        "networkPolicy": {"allowedCIDRs": ["203.0.113.0/24"], "allowedNamespaces": ["verifiers"]},
        "metrics": {
            "serviceMonitor": {
                "enabled": True,
                "labels": {"release": "prometheus"},
                "tlsConfig": {"ca": {"secret": {"name": "anj-ca", "key": "ca.crt"}}},
            },
            "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
        },
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "witness"}],
    },
)
VALUE_SETS = {"minimal": load(MINIMAL), "everything": EVERYTHING}
ALL = sorted(VALUE_SETS)


@pytest.fixture(scope="module")
def chart() -> Any:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    return render_manifests(chart, values, name="anj", namespace="witness")


@pytest.fixture(scope="module")
def rendered(chart: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: render(chart, values) for name, values in VALUE_SETS.items()}


def the_witness(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The StatefulSet, its one container, and what that container's process sees."""
    (workload,) = [doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]
    (main,) = workload["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in main["envFrom"]:
        env.update(named(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    for var in main.get("env", []):
        env[var["name"]] = var["value"]
    return workload, main, env


def source_of(workload: dict[str, Any], main: dict[str, Any], path: str) -> tuple[str, str, str]:
    """(kind, name, key) of the Secret or ConfigMap item the container sees at ``path``."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    for mount in main["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix):
            assert mount.get("readOnly") is True, mount
            volume = volumes[mount["name"]]
            kind = "secret" if "secret" in volume else "configMap"
            source = volume[kind]
            assert source["defaultMode"] == 0o440, mount["name"]
            (key,) = [i["key"] for i in source["items"] if i["path"] == path.removeprefix(prefix)]
            return kind, source.get("secretName") or source["name"], key
    raise AssertionError(f"nothing is mounted at {path}")


# --- helm lint, helm template, Kubernetes schemas ---------------------------------------


@pytest.mark.parametrize("values", ALL)
def test_helm_lint_is_clean(values: str) -> None:
    report = helm.lint(CHART, VALUE_SETS[values], strict=True, kube_version=f"v{KUBERNETES}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
    assert not problems and not report["errors"], report


@pytest.mark.parametrize("values", ALL)
def test_every_manifest_is_valid_for_kubernetes(rendered: dict[str, Any], values: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    docs = rendered[values]
    assert {doc["kind"] for doc in docs} >= {"StatefulSet", "Service", "ConfigMap", "NetworkPolicy"}
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
    jsonschema.Draft7Validator(schema).validate(defaults)
    for values in VALUE_SETS.values():
        jsonschema.Draft7Validator(schema).validate(merged(defaults, values))


# --- the witness: one pod, its state on a kept volume, its Secrets read-only ---------------


@pytest.mark.parametrize("values", ALL)
def test_the_witness_is_one_statefulset_running_coffre_witness(rendered: dict[str, Any], values: str) -> None:
    docs = rendered[values]
    workload, main, env = the_witness(docs)
    assert workload["kind"] == "StatefulSet" and workload["spec"]["replicas"] == 1
    assert main["args"] == ["witness"]
    # The coffre image, as the coffre chart runs it (same repository default, same appVersion).
    coffre_chart, witness_chart = load(COFFRE_CHART / "Chart.yaml"), load(CHART / "Chart.yaml")
    assert witness_chart["appVersion"] == coffre_chart["appVersion"]
    image = merged(load(CHART / "values.yaml"), VALUE_SETS[values])["image"]
    if image["digest"]:
        assert main["image"] == f"{image['repository']}@{image['digest']}"
    else:
        assert main["image"] == f"{load(COFFRE_CHART / 'values.yaml')['image']['repository']}:0.1.0"
        assert main["image"].endswith(":" + coffre_chart["appVersion"])
    # Its state: the claim template's volume, at COFFRE_WITNESS_STATE_DIR, kept on delete/scale.
    (claim,) = workload["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert {"name": "state", "mountPath": env["COFFRE_WITNESS_STATE_DIR"]} in main["volumeMounts"]
    assert workload["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    size = merged(load(CHART / "values.yaml"), VALUE_SETS[values])["persistence"]["size"]
    assert claim["spec"]["resources"]["requests"]["storage"] == size
    headless = named(docs, "Service", workload["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("values", ALL)
def test_the_settings_point_at_the_mounted_secrets(rendered: dict[str, Any], values: str) -> None:
    docs = rendered[values]
    workload, main, env = the_witness(docs)
    witness = merged(load(CHART / "values.yaml"), VALUE_SETS[values])["witness"]
    assert env["COFFRE_WITNESS_NAME"] == witness["name"]
    assert source_of(workload, main, env["COFFRE_WITNESS_KEY"]) == (
        "secret",
        witness["key"]["existingSecret"],
        witness["key"]["key"],
    )
    tls = witness["tls"]["existingSecret"]
    assert source_of(workload, main, env["COFFRE_WITNESS_TLS_CERT"]) == ("secret", tls, "tls.crt")
    assert source_of(workload, main, env["COFFRE_WITNESS_TLS_KEY"]) == ("secret", tls, "tls.key")
    certs = witness["operatorCerts"]
    kind, name = (
        ("secret", certs["existingSecret"])
        if certs["existingSecret"]
        else (
            "configMap",
            certs["existingConfigMap"],
        )
    )
    assert [source_of(workload, main, p) for p in env["COFFRE_WITNESS_OPERATOR_CERTS"].split(",")] == [
        (kind, name, key) for key in certs["files"]
    ]
    # It listens on every address of the pod, on the port the container and the Service name.
    assert env["COFFRE_WITNESS_HOST"] == "0.0.0.0"
    assert {p["name"]: p["containerPort"] for p in main["ports"]} == {"https": 8444}
    assert env["COFFRE_WITNESS_PORT"] == "8444"
    # Nothing secret in the ConfigMap.
    assert "PRIVATE KEY" not in yaml.safe_dump(of_kind(docs, "ConfigMap"))
    assert not of_kind(docs, "Secret")  # key material never goes through Helm


@pytest.mark.parametrize("values", ALL)
def test_every_variable_is_a_setting(rendered: dict[str, Any], values: str) -> None:
    fields = set(Settings.model_fields)
    assert fields >= WITNESS_SETTINGS
    settings = {f"COFFRE_{name.upper()}" for name in fields}
    extra = {var["name"] for var in VALUE_SETS[values].get("extraEnv", [])}
    _, _, env = the_witness(rendered[values])
    for name in env:
        assert name in settings or name in extra, name
    assert {f"COFFRE_{name.upper()}" for name in WITNESS_SETTINGS} <= set(env)


@pytest.mark.parametrize("values", ALL)
def test_the_pod_is_locked_down_and_probed_over_https(rendered: dict[str, Any], values: str) -> None:
    workload, main, _ = the_witness(rendered[values])
    pod = workload["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = main["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and security["runAsNonRoot"] is True
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(main["resources"][kind])
    assert {"name": "tmp", "mountPath": "/tmp"} in main["volumeMounts"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}, probe
    # Every Secret or ConfigMap volume is read-only, 0440.
    protected = {v["name"] for v in pod["volumes"] if "secret" in v or "configMap" in v}
    assert protected == {"key", "tls", "operator-certs"}
    for mount in main["volumeMounts"]:
        if mount["name"] in protected:
            assert mount.get("readOnly") is True, mount
    for volume in pod["volumes"]:
        if volume["name"] in protected:
            assert (volume.get("secret") or volume["configMap"])["defaultMode"] == 0o440
    # The coffre chart's identity: same user, group and fsGroup.
    coffre = load(COFFRE_CHART / "values.yaml")["podSecurityContext"]
    assert pod["securityContext"]["runAsUser"] == coffre["runAsUser"]
    assert pod["securityContext"]["fsGroup"] == coffre["fsGroup"]


@pytest.mark.parametrize("values", ALL)
def test_the_service_reaches_the_witness_on_8444(rendered: dict[str, Any], values: str) -> None:
    docs = rendered[values]
    workload, _, _ = the_witness(docs)
    service = named(docs, "Service", "anj-coffre-witness")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 8444 and port["targetPort"] == "https" and port["appProtocol"] == "https"
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    if values == "everything":
        assert service["spec"]["type"] == "LoadBalancer"
        assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


@pytest.mark.parametrize("values", ALL)
def test_the_network_policy_lets_in_8444_and_nothing_out(rendered: dict[str, Any], values: str) -> None:
    docs = rendered[values]
    workload, _, _ = the_witness(docs)
    (policy,) = of_kind(docs, "NetworkPolicy")
    spec = policy["spec"]
    assert (
        spec["podSelector"]["matchLabels"].items()
        <= workload["spec"]["template"]["metadata"]["labels"].items()
    )
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["egress"] == []
    for rule in spec["ingress"]:
        assert rule["ports"] == [{"port": "https", "protocol": "TCP"}]
    sources = [peer for rule in spec["ingress"] for peer in rule["from"]]
    if values == "everything":
        assert {"ipBlock": {"cidr": "203.0.113.0/24"}} in sources
        assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "verifiers"}}} in sources
    else:  # only the metrics scraper, until told who else
        assert len(spec["ingress"]) == 1


def test_the_monitoring_scrapes_https_and_pages_on_a_refusal(rendered: dict[str, Any]) -> None:
    docs = rendered["everything"]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "anj-ca", "key": "ca.crt"}}}
    service = named(docs, "Service", "anj-coffre-witness")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (rule,) = of_kind(docs, "PrometheusRule")
    alerts = {a["alert"]: a for group in rule["spec"]["groups"] for a in group["rules"]}
    refused = alerts["CoffreWitnessRefused"]
    assert re.search(
        r'increase\(coffre_witness_refused_total\{kind=~"fork\|truncation\|rewrite"\}\[[0-9]+m\]\)\) > 0$',
        refused["expr"],
    )
    assert refused["labels"]["severity"] == "critical" and "for" not in refused  # at once
    used = {name for a in alerts.values() for name in re.findall(r"\bcoffre_[a-z_]+", a["expr"])}
    assert used == {"coffre_witness_refused_total"}
    assert alerts["CoffreWitnessDown"]["expr"].startswith('up{job="anj-coffre-witness"')
    assert not of_kind(rendered["minimal"], "ServiceMonitor")
    assert not of_kind(rendered["minimal"], "PrometheusRule")


def test_the_notes_say_what_to_hand_the_operators(chart: Any) -> None:
    notes = chart.render(VALUE_SETS["minimal"], name="anj", namespace="witness")[
        "coffre-witness/templates/NOTES.txt"
    ]
    assert "witness.anj.example=https://" in notes
    assert "coffre verify ARCHIVE" in notes and "--witness-key" in notes and "--witness " in notes
    assert "lets nobody reach it yet" in notes


def test_pods_roll_when_the_settings_change(chart: Any) -> None:
    def checksum(values: dict[str, Any]) -> str:
        workload, _, _ = the_witness(render(chart, values))
        return workload["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    before = checksum(VALUE_SETS["minimal"])
    after = checksum(merged(VALUE_SETS["minimal"], {"witness": {"operatorCerts": {"files": ["a.pem"]}}}))
    assert before != after


# --- values the chart must refuse ---------------------------------------------------------

REFUSED = {
    "no name": ({"witness": {"name": ""}}, "witness.name"),
    "a name in capitals": ({"witness": {"name": "ANJ"}}, "/witness/name"),
    "no key": ({"witness": {"key": {"existingSecret": ""}}}, "witness.key.existingSecret"),
    "no TLS certificate": ({"witness": {"tls": {"existingSecret": ""}}}, "witness.tls.existingSecret"),
    "no operator certificates": (
        {"witness": {"operatorCerts": {"existingConfigMap": ""}}},
        "witness.operatorCerts",
    ),
    "operator certificates without files": (
        {"witness": {"operatorCerts": {"files": []}}},
        "witness.operatorCerts.files or .operators",
    ),
    "operator certificates from two places": (
        {"witness": {"operatorCerts": {"existingSecret": "s"}}},
        "not both",
    ),
    "an IDOper that is not 4 digits": (
        {"witness": {"operatorCerts": {"operators": {"99": "op.pem"}}}},
        "invalid propertyName '99'",
    ),
    "two replicas": ({"replicas": 2}, "replicas"),
    "a root user": ({"podSecurityContext": {"runAsUser": 0}}, "runAsUser"),
    "a container without limits": ({"resources": {"limits": None}}, "limits"),
    "an unknown severity": ({"metrics": {"prometheusRule": {"refusedSeverity": "info"}}}, "refusedSeverity"),
    "a read-many volume": ({"persistence": {"accessMode": "ReadWriteMany"}}, "accessMode"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_chart_refuses(chart: Any, case: str) -> None:
    override, fragment = REFUSED[case]
    with pytest.raises(helm.HelmError) as refused:
        chart.render(merged(VALUE_SETS["minimal"], override), name="anj", namespace="witness")
    assert fragment in str(refused.value)


def test_operator_certificates_are_bound_to_their_idoper(chart: Any) -> None:
    """``witness.operatorCerts.operators``: each certificate mounted, and trusted for its IDOper only
    (``IDOper=path`` in COFFRE_WITNESS_OPERATOR_CERTS, read by services/witness/service.py)."""
    values = merged(
        VALUE_SETS["minimal"],
        {
            "witness": {
                "operatorCerts": {"files": [], "operators": {"0099": "op-0099.pem", "0142": "op-0142.pem"}}
            }
        },
    )
    docs = render(chart, values)
    workload, main, env = the_witness(docs)
    entries = env["COFFRE_WITNESS_OPERATOR_CERTS"].split(",")
    assert [entry.split("=", 1)[0] for entry in entries] == ["0099", "0142"]
    certs = values["witness"]["operatorCerts"]
    for entry, key in zip(entries, ["op-0099.pem", "op-0142.pem"], strict=True):
        assert source_of(workload, main, entry.split("=", 1)[1]) == (
            "configMap",
            certs["existingConfigMap"],
            key,
        )


def test_the_defaults_alone_are_refused(chart: Any) -> None:
    with pytest.raises(helm.HelmError, match=r"witness\.name"):
        chart.render({}, name="anj", namespace="witness")
