"""Traffic profiles: how each request travels through the gateway, one axis of the sweep like the CPU list.

A profile says whether requests go over TLS (terminated at Envoy), whether each request opens a new
connection (so every request pays a TCP accept and, over TLS, a full handshake), how large the response
body is and whether clients ask for a compressed answer (Envoy gzips the default HTML page for a client that
sends `Accept-Encoding: gzip`, which costs it CPU: `-identity` clients ask for none). Scenarios name profiles
in short (`plain`, `identity`, `tls`, `tls-new-connection`, `body-16k`, `tls-ecdsa-body-1k-identity`, ...) or
spell them out as mappings:

    profiles:
      - plain
      - identity
      - tls
      - {name: big-tls, tls: true, body: 256Ki, tls_key: ecdsa-p256, accept_encoding: identity}

Pure data: the platforms turn a profile into a listener, a certificate and a backend file, and the load
generator into its connection behaviour.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from runner.quantities import format_memory, parse_memory, short_repr

PLAIN = "plain"
MAX_PROFILES = 16  # profiles in one sweep (each multiplies the configurations)
MAX_BODY_BYTES = 16 * 2**20  # a response body nginx serves from a file the run writes (16 MiB)
MIN_BODY_BYTES = 1
BODY_PATH_PREFIX = "/size/"  # the backend serves body profiles at /size/<bytes> as application/octet-stream
TlsKey = Literal["rsa-2048", "ecdsa-p256"]
# Short names: [tls[-ecdsa]][-new-connection][-body-<size>][-identity|-gzip], or plain. Sizes: 1024, 16k (KiB),
# 1m (MiB). Matched against "-" + the name, so every part starts with one dash.
_SHORT_RE = re.compile(
    r"(?:-(?P<tls>tls)(?:-(?P<ecdsa>ecdsa))?)?(?:-(?P<new>new-connection))?(?:-body-(?P<size>[0-9]{1,9}[km]?))?"
    r"(?:-(?P<encoding>identity|gzip))?"
)
ENCODINGS = {"identity": "identity", "gzip": "gzip"}  # a short name's part -> the Accept-Encoding it sends
_NAME_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,38}[a-z0-9])?")
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20}


def _name(text: str) -> str:
    if not _NAME_RE.fullmatch(text):
        raise ValueError("not a profile name: lowercase letters, digits and '-', at most 40, e.g. tls-new-connection")
    return text


def _encoding(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[ -~]{1,200}", value):
        raise ValueError("not an Accept-Encoding value: printable ASCII, at most 200 characters, e.g. identity")
    return value


def _body(value: Any) -> Any:
    if value is None:
        return None
    amount = parse_memory(value)
    if not MIN_BODY_BYTES <= amount <= MAX_BODY_BYTES:
        raise ValueError(f"{short_repr(value)} is outside 1..{format_memory(MAX_BODY_BYTES)} (MAX_BODY_BYTES)")
    return amount


class TrafficProfile(BaseModel):
    """One way requests travel: TLS or not, a connection per request or keep-alive, the response size."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    name: Annotated[str, AfterValidator(_name)]
    tls: bool = False
    new_connection: bool = False  # every request on a new connection (Connection: close): accept + handshake
    body_bytes: Annotated[int | None, BeforeValidator(_body)] = Field(default=None, alias="body")
    tls_key: TlsKey = "rsa-2048"  # the certificate's key: it sets a full handshake's cost
    accept_encoding: Annotated[str | None, AfterValidator(_encoding)] = None  # None: the scenario's

    @model_validator(mode="after")
    def _plain_is_plain(self) -> TrafficProfile:
        changed = self.tls or self.new_connection or self.body_bytes is not None or self.accept_encoding is not None
        if self.name == PLAIN and changed:
            raise ValueError("the name plain is kept for plain HTTP with keep-alive and the default page: rename it")
        return self

    @property
    def is_plain(self) -> bool:
        return self.name == PLAIN

    def path(self, default: str) -> str:
        """The request path: the body file for a body profile, else the scenario's path."""
        return f"{BODY_PATH_PREFIX}{self.body_bytes}" if self.body_bytes is not None else default

    @property
    def description(self) -> str:
        """'TLS (rsa-2048), new connection per request, 16Ki body' / 'plain HTTP, keep-alive'."""
        parts = [f"TLS ({self.tls_key})" if self.tls else "plain HTTP"]
        parts.append("new connection per request" if self.new_connection else "keep-alive")
        if self.body_bytes is not None:
            parts.append(f"{format_memory(self.body_bytes)} body")
        if self.accept_encoding is not None:
            parts.append(encoding_text(self.accept_encoding))
        return ", ".join(parts)


def encoding_text(accept_encoding: str) -> str:
    """How a report names what clients ask for: 'clients ask for no compression (identity)'."""
    if accept_encoding.strip().lower() == "identity":
        return "clients ask for no compression (identity)"
    return f"clients ask for compression (Accept-Encoding: {accept_encoding})"


PLAIN_PROFILE = TrafficProfile(name=PLAIN)


def parse_short(name: str) -> dict[str, Any]:
    """A profile's fields from its short name; ValueError naming the grammar when it is not one."""
    if name == PLAIN:
        return {"name": name}
    match = _SHORT_RE.fullmatch(f"-{name}")
    if not name or match is None or not any(match.groupdict().values()):
        raise ValueError(
            f"{short_repr(name)} is not a profile name: plain, tls, tls-ecdsa, new-connection, "
            "tls-new-connection, body-16k, identity, or a mapping with name, tls, new_connection, body, tls_key, "
            "accept_encoding"
        )
    fields: dict[str, Any] = {"name": name, "tls": bool(match["tls"]), "new_connection": bool(match["new"])}
    if match["ecdsa"]:
        fields["tls_key"] = "ecdsa-p256"
    if match["encoding"]:
        fields["accept_encoding"] = ENCODINGS[match["encoding"]]
    size = match["size"]
    if size:
        unit = size[-1] if size[-1] in "km" else ""
        fields["body"] = int(size[: len(size) - len(unit)]) * _SIZE_UNITS[unit]
    return fields


def expand(value: Any) -> Any:
    """Before validation: a single profile becomes a list, and short names become mappings."""
    values = value if isinstance(value, list | tuple) else [value]
    if len(values) > MAX_PROFILES:
        raise ValueError(f"{len(values)} profiles; at most {MAX_PROFILES} (MAX_PROFILES)")
    return [parse_short(v) if isinstance(v, str) else v for v in values]


def distinct_names(profiles: tuple[TrafficProfile, ...]) -> tuple[TrafficProfile, ...]:
    seen: set[str] = set()
    for profile in profiles:
        if profile.name in seen:
            raise ValueError(f"profile {profile.name} is listed twice")
        seen.add(profile.name)
    return profiles


ProfileList = Annotated[
    tuple[TrafficProfile, ...], BeforeValidator(expand), Field(min_length=1), AfterValidator(distinct_names)
]
