"""Configuration from environment variables (``COFFRE_…``), validated at start-up.

Every service reads the same :class:`Settings`; a bad value stops the process with a
message naming the variable (see :func:`load_settings`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return {item.strip() for item in value.split(",") if item.strip()}
    return value


@dataclass(frozen=True, slots=True)
class Topics:
    events_in: str
    normalized: str
    rejected: str
    receipts: str
    acquittals: str

    def all(self) -> tuple[str, ...]:
        return (self.events_in, self.normalized, self.rejected, self.receipts, self.acquittals)


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
        Path("var"), description="where ingest keeps its IDEvt store and the vault its journals"
    )
    synthesis_events: Annotated[set[str], NoDecode, BeforeValidator(_csv)] = Field(
        default_factory=lambda: {"POJEU"},
        description="event types recorded without acquittal (comma-separated); annex 1.3.6: POJEU",
    )
    late_after_seconds: float = Field(
        2.0, gt=0, description="a record later than this after ingest is counted late"
    )
    max_event_bytes: int = Field(1024 * 1024, ge=1024, description="the largest input message accepted")
    batch_max: int = Field(1000, ge=1, description="the most messages one service handles in one batch")
    batch_wait_ms: int = Field(2, ge=0, description="how long a service waits to fill a batch")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    lot_max_events: int = Field(
        1000, ge=1, le=1_000_000, description="a lot is sealed once this many events wait"
    )
    lot_max_age_seconds: float = Field(
        60.0, gt=0, description="a lot is sealed once its oldest event has waited this long"
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

    @property
    def topics(self) -> Topics:
        p = self.topic_prefix
        return Topics(
            f"{p}events.in", f"{p}events.normalized", f"{p}events.rejected", f"{p}receipts", f"{p}acquittals"
        )

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if (self.signing_key is None) != (self.signing_cert is None):
            raise ValueError("COFFRE_SIGNING_KEY and COFFRE_SIGNING_CERT go together: set both or neither")
        if self.archive_backend == "s3" and not self.s3_bucket:
            raise ValueError("COFFRE_ARCHIVE_BACKEND=s3 needs COFFRE_S3_BUCKET")
        return self

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


def load_settings(**overrides: Any) -> Settings:
    """The settings, or exit with one line per bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        for error in exc.errors():
            where = f"COFFRE_{str(error['loc'][0]).upper()}: " if error["loc"] else ""
            print(f"coffre: configuration error: {where}{error['msg']}", file=sys.stderr)
        raise SystemExit(2) from None
