"""``CoffreClient`` takes what it is not given from the ``COFFRE_*`` environment, as coffre's services
do: the bootstrap servers, the topic prefix, the synthesis events and the ``COFFRE_KAFKA_*`` TLS and SASL
settings (docs/operations.md, "TLS and SASL"); what it is given wins. No broker: the client is only
built (its end-to-end run on a secured Apache Kafka is in tests/pipeline/test_apache_kafka.py)."""

from __future__ import annotations

import ssl

import pytest
from pydantic import ValidationError

from coffre.client import CoffreClient
from coffre.config import Settings

from apache_kafka import TlsMaterial


@pytest.fixture
def platform_env(monkeypatch, tmp_path):
    tls = TlsMaterial(tmp_path / "tls", clients=())
    for name, value in {
        "COFFRE_BOOTSTRAP_SERVERS": "kafka-1:9093,kafka-2:9093",
        "COFFRE_TOPIC_PREFIX": "op42.",
        "COFFRE_SYNTHESIS_EVENTS": "POJEU,POBILAN",
        "COFFRE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "COFFRE_KAFKA_SSL_CA_FILE": str(tls.ca),
        "COFFRE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "COFFRE_KAFKA_SASL_USERNAME": "coffre-platform",
        "COFFRE_KAFKA_SASL_PASSWORD": "its-password",
    }.items():
        monkeypatch.setenv(name, value)
    return tls


def test_the_client_reads_the_environment_for_what_it_is_not_given(platform_env):
    client = CoffreClient("kafka:9093")
    assert client.bootstrap == "kafka:9093"  # given: wins over COFFRE_BOOTSTRAP_SERVERS
    assert client.security["security_protocol"] == "SASL_SSL"
    assert client.security["sasl_mechanism"] == "SCRAM-SHA-512"
    assert client.security["sasl_plain_username"] == "coffre-platform"
    assert client.security["sasl_plain_password"] == "its-password"
    assert isinstance(client.security["ssl_context"], ssl.SSLContext)
    assert client.topics.events_in == "op42.events.in" and client.topics.acquittals == "op42.acquittals"
    assert client.synthesis_events == {"POJEU", "POBILAN"}
    assert CoffreClient().bootstrap == "kafka-1:9093,kafka-2:9093"


def test_what_the_client_is_given_wins(platform_env):
    client = CoffreClient(
        "kafka:9092",
        Settings(topic_prefix="other.").topics,
        {"POJEU"},
        security={"security_protocol": "PLAINTEXT"},
    )
    assert client.security == {"security_protocol": "PLAINTEXT"}
    assert client.topics.events_in == "other.events.in" and client.synthesis_events == {"POJEU"}
    assert CoffreClient("kafka:9092", security={}).security == {}


def test_without_kafka_settings_the_client_speaks_plaintext(monkeypatch):
    for name in ("COFFRE_KAFKA_SECURITY_PROTOCOL", "COFFRE_KAFKA_SASL_MECHANISM", "COFFRE_TOPIC_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    client = CoffreClient("kafka:9092")
    assert client.security == {"security_protocol": "PLAINTEXT"}
    assert client.topics.events_in == "coffre.events.in"


def test_a_bad_kafka_setting_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("COFFRE_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.delenv("COFFRE_KAFKA_SASL_MECHANISM", raising=False)
    monkeypatch.setenv("COFFRE_KAFKA_SASL_USERNAME", "coffre-platform")
    with pytest.raises(ValidationError, match=r"(?i)sasl"):
        CoffreClient("kafka:9092")
