"""Configuration from environment variables (``COFFRE_…``), validated at start-up.

Every service reads the same :class:`Settings`; a bad value stops the process with a
message naming the variable (see :func:`load_settings`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .domain.evidence import NAME_RE
from .domain.lot import MAX_LOT_EVENTS
from .domain.messages import DEFAULT_MAX_MESSAGE_BYTES


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return {item.strip() for item in value.split(",") if item.strip()}
    return value


def _semicolons(value: Any) -> Any:
    """Distinguished names hold commas, so a list of them is separated by semicolons."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(";") if item.strip())
    return value


@dataclass(frozen=True, slots=True)
class Topics:
    events_in: str
    normalized: str
    rejected: str
    receipts: str
    acquittals: str
    ingest_state: str
    """ingest's snapshots: each partition's IDEvt counters and the input offset they stand at"""
    audit: str
    """the auditor's findings, one record per recorded event with findings (keyed by IDCoffre)"""

    def all(self) -> tuple[str, ...]:
        return (
            self.events_in,
            self.normalized,
            self.rejected,
            self.receipts,
            self.acquittals,
            self.ingest_state,
            self.audit,
        )


class Settings(BaseSettings):
    """coffre's settings. Each field is the variable ``COFFRE_<NAME>`` (upper case)."""

    model_config = SettingsConfigDict(env_prefix="COFFRE_", extra="ignore")

    bootstrap_servers: str = Field(
        "127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]"
    )
    topic_prefix: str = Field("coffre.", description="prefix of every topic name")
    partitions: int = Field(
        6, ge=1, le=1000, description="partitions of each topic coffre creates at start-up"
    )
    replication_factor: int = Field(1, ge=1, description="replication of the topics coffre creates")
    data_dir: Path = Field(
        Path("var"), description="where the vault keeps its journals (ingest keeps no local state)"
    )
    synthesis_events: Annotated[set[str], NoDecode, BeforeValidator(_csv)] = Field(
        default_factory=lambda: {"POJEU"},
        description="event types recorded without acquittal (comma-separated); annex 1.3.6: POJEU",
    )
    audit_fixed_limit_bets: int = Field(
        4,
        ge=0,
        description=(
            "the hand audit's fixed-limit cap: bets a betting round allows, the opening bet (or the big"
            " blind) counting as one (decree 2016-1326 art. 3); 0: no cap"
        ),
    )
    late_after_seconds: float = Field(
        2.0, gt=0, description="a record later than this after ingest is counted late"
    )
    max_event_bytes: int = Field(
        1024 * 1024, ge=1024, le=100 * 1024 * 1024, description="the largest input message accepted"
    )
    max_message_bytes: int = Field(
        DEFAULT_MAX_MESSAGE_BYTES,
        ge=64 * 1024,
        le=100 * 1024 * 1024,
        description="the largest record coffre publishes (key, value, headers); at most the topics' "
        "max.message.bytes, checked at start-up",
    )
    batch_max: int = Field(1000, ge=1, description="the most messages one service handles in one batch")
    batch_wait_ms: int = Field(2, ge=0, description="how long a service waits to fill a batch")
    ingest_snapshot_seconds: float = Field(
        2.0,
        gt=0,
        le=300,
        description="how often ingest snapshots each partition's IDEvt counters to <prefix>ingest.state "
        "(a replica taking a partition over re-reads the inputs since the last one)",
    )
    ingest_session_seconds: float = Field(
        3.0,
        ge=1,
        le=60,
        description="ingest's consumer-group session: a replica silent this long (killed, paused, cut off) "
        "loses its partitions to the others; it heartbeats every sixth of it",
    )
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        BeforeValidator(lambda v: v.upper() if isinstance(v, str) else v),
    ] = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_format: Literal["json", "text"] = Field(
        "json", description="json (one object per line, with IDCoffre/IDEvt/correlation-id) or text"
    )
    http_host: str = Field(
        "127.0.0.1", description="address of the health and metrics server (0.0.0.0 in Kubernetes)"
    )
    ops_port: int = Field(
        8080, ge=0, le=65535, description="port of /healthz, /readyz and /metrics (plain HTTP; 0: off)"
    )
    shutdown_timeout_seconds: float = Field(
        8.0, gt=0, le=60, description="SIGTERM: how long a service may drain before it stops anyway"
    )
    vault_replicas: int = Field(
        1,
        ge=1,
        le=1000,
        description="vault replicas; they share the partitions through their consumer group (one that dies: the others take its partitions over)",
    )
    vault_ordinal: int | None = Field(
        None,
        ge=0,
        description="this vault's ordinal, named in its logs (default: the number ending the host name, e.g. vault-2)",
    )
    lot_max_events: int = Field(
        1000, ge=1, le=MAX_LOT_EVENTS, description="a lot is sealed once this many events wait"
    )
    lot_max_age_seconds: float = Field(
        60.0, gt=0, description="a lot is sealed once its oldest event has waited this long"
    )
    journal_keep_seconds: float = Field(
        0.0,
        ge=0,
        description="how long the vault's journal keeps segments the archive holds (0: deleted once sealed)",
    )
    tsa_urls: str = Field(
        "",
        description="RFC 3161 TSAs that time-stamp every checkpoint, comma-separated 'name=url' or 'url' "
        "(the name, [a-z0-9][a-z0-9.-]*, is the host by default; it names the token files); empty: none",
    )
    tsa_certs: str = Field(
        "",
        description="PEM certificates (comma-separated paths) the TSAs' certificates must chain to; "
        "required with COFFRE_TSA_URLS (a token is stored only once it verifies)",
    )
    tsa_timeout_seconds: float = Field(
        5.0, gt=0, le=300, description="the longest call to a TSA or a witness (then retried with back-off)"
    )
    witness_urls: str = Field(
        "",
        description="witnesses that cosign every checkpoint, comma-separated 'name=https://…' (the name, "
        "the host by default, names the cosignature files); empty: none",
    )
    witness_ca: Path | None = Field(
        None,
        description="PEM CA bundle the witnesses' TLS certificates must chain to (default: the system's)",
    )
    witness_keys: str = Field(
        "",
        description="the witnesses' Ed25519 public keys (comma-separated PEM paths): when set, a "
        "cosignature is stored only once one of them verifies it",
    )
    evidence_max_retry_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="a TSA or witness that fails is tried again after a back-off doubling up to this",
    )
    archive_backend: Literal["local", "s3"] = Field("local", description="where sealed lots go: local or s3")
    archive_dir: Path | None = Field(
        None, description="the local archive's root (default: <data dir>/archive)"
    )
    s3_bucket: str = Field("", description="S3 archive: the bucket (created with Object Lock if missing)")
    s3_prefix: str = Field("", description="S3 archive: a key prefix inside the bucket")
    s3_endpoint_url: str = Field("", description="S3 archive: the endpoint (empty: AWS)")
    s3_region: str = Field("eu-west-3", description="S3 archive: the region")
    s3_retention_days: int = Field(
        6 * 365 + 2, ge=1, description="S3 archive: Object Lock retention in compliance mode (6 years)"
    )
    signing_key: Path | None = Field(
        None, description="PEM private key that signs lots (default: a development key in <data dir>/keys)"
    )
    signing_cert: Path | None = Field(None, description="PEM certificate of the signing key")
    trusted_certs: str = Field(
        "", description="extra PEM certificates (comma-separated paths) still trusted, e.g. after a rotation"
    )
    api_host: str = Field("127.0.0.1", description="address of the regulator API (0.0.0.0 in Kubernetes)")
    api_port: int = Field(8443, ge=0, le=65535, description="port of the regulator API, HTTPS (0: off)")
    api_tls_cert: Path | None = Field(
        None,
        description="regulator API: PEM server certificate (default: a development one in <data dir>/tls)",
    )
    api_tls_key: Path | None = Field(None, description="regulator API: PEM key of the server certificate")
    api_client_ca: Path | None = Field(
        None, description="regulator API: PEM CA bundle that client certificates must chain to (mutual TLS)"
    )
    witness_name: str = Field(
        "", description="witness: its name in cosignatures and its vkey (e.g. witness.anj.example)"
    )
    witness_key: Path | None = Field(None, description="witness: its Ed25519 private key, PKCS#8 PEM")
    witness_state_dir: Path | None = Field(
        None, description="witness: the folder of its durable state (default: <data dir>/witness)"
    )
    witness_operator_certs: str = Field(
        "", description="witness: the operators' signing certificates it trusts (comma-separated PEM paths)"
    )
    witness_host: str = Field("127.0.0.1", description="witness: its HTTPS address (0.0.0.0 in Kubernetes)")
    witness_port: int = Field(8444, ge=1, le=65535, description="witness: its HTTPS port")
    witness_tls_cert: Path | None = Field(None, description="witness: PEM server certificate (required)")
    witness_tls_key: Path | None = Field(None, description="witness: PEM key of the server certificate")
    api_allowed_subjects: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_semicolons)] = Field(
        (), description="regulator API: client certificate subjects allowed, RFC 4514, separated by ';'"
    )
    api_tokens_file: Path | None = Field(
        None, description="regulator API: file of bearer tokens, one 'name:token' per line (a Secret)"
    )
    api_auth: Literal["mtls", "token", "either", "both"] = Field(
        "either", description="regulator API: what a request must present: mtls, token, either or both"
    )
    api_max_range_days: int = Field(
        366, ge=1, le=3660, description="regulator API: the longest date range one lot listing may ask for"
    )
    api_handshake_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=600,
        description="regulator API: a connection must finish its TLS handshake within this",
    )
    api_request_head_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=600,
        description="regulator API: after the handshake, the request line and headers must arrive within this",
    )
    console: bool = Field(
        True, description="regulator API: serve the regulator's console under /console/ (docs/console.md)"
    )
    console_index: str | None = Field(
        None,
        description="the console's index: an SQLite file (default <COFFRE_DATA_DIR>/console/index.sqlite), "
        "or a PostgreSQL database as a postgresql:// URL (API replicas may share one); rebuilt from the "
        "archive alone with coffre console-index",
    )
    console_index_interval_seconds: float = Field(
        2.0, gt=0, le=3600, description="how often the console's index looks for new lots in the archive"
    )
    api_idle_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="regulator API: after an answer, the next request's headers must arrive within this",
    )
    access_log_dir: Path | None = Field(
        None, description="regulator API: where every access is logged, fsynced (default: <data dir>/access)"
    )

    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description="how every coffre client talks to Kafka: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    kafka_ssl_ca_file: Path | None = Field(
        None,
        description="Kafka TLS: PEM CA bundle the brokers' certificates must chain to (default: the system's)",
    )
    kafka_ssl_cert_file: Path | None = Field(
        None, description="Kafka TLS: PEM client certificate (mutual TLS; the principal is its subject)"
    )
    kafka_ssl_key_file: Path | None = Field(None, description="Kafka TLS: PEM key of the client certificate")
    kafka_ssl_key_password_file: Path | None = Field(
        None, description="Kafka TLS: a file holding the client key's password, if the key is encrypted"
    )
    kafka_ssl_check_hostname: bool = Field(
        True, description="Kafka TLS: check that the broker's certificate names the host connected to"
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = Field(
        None, description="Kafka SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (SASL_* protocols)"
    )
    kafka_sasl_username: str = Field("", description="Kafka SASL: this service's principal (PLAIN, SCRAM)")
    kafka_sasl_password: SecretStr = Field(
        SecretStr(""),
        description="Kafka SASL: its password (PLAIN, SCRAM); or COFFRE_KAFKA_SASL_PASSWORD_FILE",
    )
    kafka_sasl_password_file: Path | None = Field(
        None, description="Kafka SASL: a file holding the password (a mounted Secret)"
    )
    kafka_sasl_oauth_token_file: Path | None = Field(
        None,
        description="Kafka SASL OAUTHBEARER: a file holding the current token, read again at each login "
        "(a projected token or a sidecar keeps it fresh)",
    )
    kafka_create_topics: bool = Field(
        True,
        description="create coffre's missing topics at start-up; false: they must exist (an admin or Strimzi "
        "creates them) and are only checked",
    )
    record_keys: SecretStr = Field(
        SecretStr(""),
        description="keys that authenticate coffre's own Kafka records (HMAC-SHA256), comma-separated "
        "id:base64; the first signs, every one verifies; or COFFRE_RECORD_KEYS_FILE",
    )
    record_keys_file: Path | None = Field(
        None,
        description="a file of record keys, one id:base64 per line (default: a development key in "
        "<data dir>/keys); every service of one install shares it",
    )
    kafka_session_seconds: float | None = Field(
        None,
        ge=1,
        le=60,
        description="the consumer-group session of the vault and the acquittal service (default: "
        "COFFRE_INGEST_SESSION_SECONDS): a member silent this long (killed, paused) is dropped from its "
        "group, and a restarted member without COFFRE_KAFKA_GROUP_INSTANCE_ID joins about then; it "
        "heartbeats every sixth of it; at least the brokers' group.min.session.timeout.ms",
    )
    consumer_fetch_bytes: int | None = Field(
        None,
        ge=1024,
        description="the services' consumers ask each partition for at most this many bytes per fetch "
        "(a larger first record is still returned whole: KIP-74, and Tansu does so); unset: 1 MiB, "
        "ingest's max message size + 1 MiB; coffre up sets 65536 on the embedded broker, whose fetch "
        "slows with the bytes asked",
    )
    consumer_fetch_wait_ms: int | None = Field(
        None,
        ge=0,
        le=10_000,
        description="how long the services' consumers let the broker hold a fetch that finds nothing "
        "(unset: 5 ms); Apache Kafka answers as soon as a record comes, the embedded broker only after "
        "the whole wait, and coffre up sets 100 there (a shorter wait starves a lagging consumer)",
    )
    broker_port: int = Field(
        9092,
        ge=1,
        le=65534,
        description="coffre up's own Apache Kafka: its port on 127.0.0.1 (its KRaft controller takes the "
        "next one)",
    )
    kafka_group_instance_id: str | None = Field(
        None,
        description="static group membership: this process's name in its consumer groups, stable across "
        "its restarts and unique among the replicas of its service (Kubernetes: the pod's name); a "
        "restarted member takes its partitions back at once on Apache Kafka, without a rebalance, but "
        "never leaves its group at SIGTERM (its partitions wait for its session); unset: dynamic "
        "membership, the one to keep on the embedded broker (Tansu 0.6.0 holds each static join 6 s)",
    )

    @property
    def topics(self) -> Topics:
        p = self.topic_prefix
        return Topics(
            f"{p}events.in",
            f"{p}events.normalized",
            f"{p}events.rejected",
            f"{p}receipts",
            f"{p}acquittals",
            f"{p}ingest.state",
            f"{p}audit",
        )

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if (self.signing_key is None) != (self.signing_cert is None):
            raise ValueError("COFFRE_SIGNING_KEY and COFFRE_SIGNING_CERT go together: set both or neither")
        if self.archive_backend == "s3" and not self.s3_bucket:
            raise ValueError("COFFRE_ARCHIVE_BACKEND=s3 needs COFFRE_S3_BUCKET")
        if (self.api_tls_cert is None) != (self.api_tls_key is None):
            raise ValueError("COFFRE_API_TLS_CERT and COFFRE_API_TLS_KEY go together: set both or neither")
        if self.api_auth in ("mtls", "both") and self.api_tls_cert is not None and self.api_client_ca is None:
            raise ValueError(f"COFFRE_API_AUTH={self.api_auth} needs COFFRE_API_CLIENT_CA")
        if (
            self.api_auth in ("token", "both")
            and self.api_tls_cert is not None
            and self.api_tokens_file is None
        ):
            raise ValueError(f"COFFRE_API_AUTH={self.api_auth} needs COFFRE_API_TOKENS_FILE")
        if (
            self.api_auth == "either"
            and self.api_tls_cert is not None
            and self.api_client_ca is None
            and self.api_tokens_file is None
        ):
            raise ValueError(
                "COFFRE_API_AUTH=either needs COFFRE_API_CLIENT_CA or COFFRE_API_TOKENS_FILE: "
                "otherwise no request could be let in"
            )
        self._kafka_security_consistent()
        self._evidence_consistent()
        if self.vault_ordinal is not None and self.vault_ordinal >= self.vault_replicas:
            raise ValueError("COFFRE_VAULT_ORDINAL must be below COFFRE_VAULT_REPLICAS")
        return self

    def _evidence_consistent(self) -> None:
        for name, text in (("tsa_urls", self.tsa_urls), ("witness_urls", self.witness_urls)):
            seen: set[str] = set()
            for label, url in endpoints(text):
                parts = urlsplit(url)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise ValueError(f"COFFRE_{name.upper()}: {url!r} is not an http(s) URL")
                if not NAME_RE.fullmatch(label):
                    raise ValueError(
                        f"COFFRE_{name.upper()}: the name {label!r} is not [a-z0-9][a-z0-9.-]{{0,62}} "
                        "(write name=url)"
                    )
                if label in seen:
                    raise ValueError(f"COFFRE_{name.upper()}: the name {label!r} is given twice")
                seen.add(label)
        if self.tsa_urls.strip() and not paths(self.tsa_certs):
            raise ValueError(
                "COFFRE_TSA_URLS needs COFFRE_TSA_CERTS: the certificates a TSA's tokens must chain to"
            )

    @property
    def tsa_endpoints(self) -> list[tuple[str, str]]:
        """(name, url) of each TSA of ``COFFRE_TSA_URLS``."""
        return endpoints(self.tsa_urls)

    @property
    def witness_endpoints(self) -> list[tuple[str, str]]:
        """(name, url) of each witness of ``COFFRE_WITNESS_URLS``."""
        return endpoints(self.witness_urls)

    def _kafka_security_consistent(self) -> None:
        protocol = self.kafka_security_protocol
        tls = protocol in ("SSL", "SASL_SSL")
        sasl = protocol.startswith("SASL_")
        tls_files = (
            "kafka_ssl_ca_file",
            "kafka_ssl_cert_file",
            "kafka_ssl_key_file",
            "kafka_ssl_key_password_file",
        )
        if not tls:
            for name in tls_files:
                if getattr(self, name) is not None:
                    # a TLS file with a plaintext protocol would connect in the clear without a word
                    raise ValueError(
                        f"COFFRE_{name.upper()} is set but COFFRE_KAFKA_SECURITY_PROTOCOL={protocol}"
                    )
        if (self.kafka_ssl_cert_file is None) != (self.kafka_ssl_key_file is None):
            raise ValueError("COFFRE_KAFKA_SSL_CERT_FILE and COFFRE_KAFKA_SSL_KEY_FILE go together")
        mechanism = self.kafka_sasl_mechanism
        if sasl and mechanism is None:
            raise ValueError(f"COFFRE_KAFKA_SECURITY_PROTOCOL={protocol} needs COFFRE_KAFKA_SASL_MECHANISM")
        if not sasl and mechanism is not None:
            raise ValueError(
                f"COFFRE_KAFKA_SASL_MECHANISM={mechanism} needs COFFRE_KAFKA_SECURITY_PROTOCOL=SASL_SSL "
                "(or SASL_PLAINTEXT)"
            )
        if mechanism == "OAUTHBEARER":
            if self.kafka_sasl_oauth_token_file is None:
                raise ValueError(
                    "COFFRE_KAFKA_SASL_MECHANISM=OAUTHBEARER needs COFFRE_KAFKA_SASL_OAUTH_TOKEN_FILE"
                )
        elif mechanism is not None:
            if not self.kafka_sasl_username:
                raise ValueError(f"COFFRE_KAFKA_SASL_MECHANISM={mechanism} needs COFFRE_KAFKA_SASL_USERNAME")
            inline = bool(self.kafka_sasl_password.get_secret_value())
            if inline == (self.kafka_sasl_password_file is not None):
                raise ValueError(
                    f"COFFRE_KAFKA_SASL_MECHANISM={mechanism} needs one of COFFRE_KAFKA_SASL_PASSWORD "
                    "and COFFRE_KAFKA_SASL_PASSWORD_FILE"
                )
        if self.record_keys.get_secret_value() and self.record_keys_file is not None:
            raise ValueError("set one of COFFRE_RECORD_KEYS and COFFRE_RECORD_KEYS_FILE")

    @property
    def access_log_root(self) -> Path:
        return self.access_log_dir or Path(self.data_dir) / "access"

    @property
    def journal_root(self) -> Path:
        """The vault's journals, one folder per coffre (``coffre up`` seeds ingest from them too)."""
        return Path(self.data_dir) / "vault" / "journal"

    @property
    def console_index_path(self) -> Path | str:
        """The console's index: the SQLite file's path, or the PostgreSQL database's URL (a str)."""
        if self.console_index and self.console_index.startswith(("postgresql://", "postgres://")):
            return self.console_index
        return (
            Path(self.console_index)
            if self.console_index
            else Path(self.data_dir) / "console" / "index.sqlite"
        )

    @property
    def archive_root(self) -> Path:
        return self.archive_dir or Path(self.data_dir) / "archive"

    @property
    def key_paths(self) -> tuple[Path, Path, bool]:
        """(key, certificate, whether it is the generated development key)."""
        if self.signing_key and self.signing_cert:
            return self.signing_key, self.signing_cert, False
        keys = Path(self.data_dir) / "keys"
        return keys / "signing-key.pem", keys / "signing-cert.pem", True

    @property
    def topic_partitions(self) -> dict[str, int]:
        return dict.fromkeys(self.topics.all(), self.partitions)

    @property
    def events_in_record_bytes(self) -> int:
        """The largest record ``events.in`` must take: the largest input ingest reads, with its key,
        headers and framing (and at least Kafka's default)."""
        from coffre.domain.limits import INPUT_RECORD_HEADROOM

        return max(1_048_588, self.max_event_bytes + INPUT_RECORD_HEADROOM)


def endpoints(text: str) -> list[tuple[str, str]]:
    """``name=url`` or ``url`` items, comma-separated: (name, url), the name being the URL's host
    (lower case) when not given."""
    found = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, url = item.partition("=")
        if not sep or "://" in name:
            name, url = "", item
        url = url.strip()
        found.append((name.strip() or (urlsplit(url).hostname or "").lower(), url))
    return found


def paths(text: str) -> list[Path]:
    """A comma-separated list of paths."""
    return [Path(item.strip()) for item in text.split(",") if item.strip()]


def configuration_error(message: str) -> NoReturn:
    """Stop the process as :func:`load_settings` does: one line naming the variable, exit 2."""
    print(f"coffre: configuration error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_settings(**overrides: Any) -> Settings:
    """The settings, or exit with one line per bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        for error in exc.errors():
            where = f"COFFRE_{str(error['loc'][0]).upper()}: " if error["loc"] else ""
            print(f"coffre: configuration error: {where}{error['msg']}", file=sys.stderr)
        raise SystemExit(2) from None
