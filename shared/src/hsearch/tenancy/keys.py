"""API keys: their format, their hash, the server key they are hashed under.

A key reads ``hsk_<prefix>_<secret>`` (an operator's: ``hso_``): the prefix is 12 hex
characters, public (it is how a key is found, listed and named in logs and the audit
log); the secret is 32 random bytes (``secrets.token_urlsafe``), 256 bits. The leading
marker lets secret scanners and people tell an hsearch key at a glance.

Stored is ``HMAC-SHA-256(server key, whole key)``, compared in constant time. Not a slow
password hash (bcrypt, scrypt, Argon2): those exist to make guessing low-entropy
passwords expensive, and a 256-bit random secret cannot be guessed at any speed, while
their 50-500 ms per check would make every uncached request that slow (a cached search
is to cost about 3 ms). The server key makes a stolen table useless on its own: without
the key an attacker cannot test a guess offline, and with it still faces 2^256 secrets.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from hsearch.config import AuthSettings
from hsearch.errors import ConfigurationError, InvalidCredentialError, InvalidRequestError
from hsearch.types import CredentialRole

__all__ = [
    "IssuedKey",
    "ParsedKey",
    "generate_key",
    "key_hmac",
    "load_server_key",
    "matches",
    "parse_duration",
    "parse_key",
]

MARKERS = {CredentialRole.TENANT: "hsk", CredentialRole.OPERATOR: "hso"}
_ROLES = {marker: role for role, marker in MARKERS.items()}
PREFIX_HEX = 12
_KEY = re.compile(r"(hsk|hso)_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


@dataclass(frozen=True, slots=True)
class ParsedKey:
    role: CredentialRole
    prefix: str
    """``hsk_<12 hex>``: the public part, unique, what the key is looked up by."""

    def __repr__(self) -> str:  # never the secret, even in a traceback
        return f"ParsedKey(role={self.role.value!r}, prefix={self.prefix!r})"


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A new key as its creator sees it, once: ``key`` is not stored anywhere."""

    key: str
    prefix: str
    role: CredentialRole

    def __repr__(self) -> str:
        return f"IssuedKey(prefix={self.prefix!r}, role={self.role.value!r})"


def generate_key(role: CredentialRole) -> IssuedKey:
    """A fresh key: 48 bits of public prefix, 256 bits of secret."""
    prefix = f"{MARKERS[role]}_{secrets.token_hex(PREFIX_HEX // 2)}"
    return IssuedKey(key=f"{prefix}_{secrets.token_urlsafe(32)}", prefix=prefix, role=role)


def parse_key(key: str) -> ParsedKey:
    """The role and prefix of ``key``; raises InvalidCredentialError (401) when it is
    not shaped like a key this service issues (without repeating it)."""
    match = _KEY.fullmatch(key)
    if match is None:
        msg = "invalid API key: expected hsk_<prefix>_<secret>"
        raise InvalidCredentialError(msg)
    marker, prefix_hex, _secret = match.groups()
    return ParsedKey(role=_ROLES[marker], prefix=f"{marker}_{prefix_hex}")


def key_hmac(server_key: bytes, key: str) -> str:
    """What is stored for ``key`` (hex): HMAC-SHA-256 under the server key, over the
    whole key, so the prefix and the secret are bound together."""
    return hmac.new(server_key, key.encode(), hashlib.sha256).hexdigest()


def matches(server_key: bytes, key: str, stored: str) -> bool:
    """Whether ``key`` is the key ``stored`` was computed from, in constant time."""
    return hmac.compare_digest(key_hmac(server_key, key), stored)


def load_server_key(settings: AuthSettings, *, secret_file: Path) -> bytes:
    """The server key: ``auth.secret`` when set, else the one in ``secret_file``, which
    is generated (32 random bytes, hex, mode 0600) on first use.

    Processes starting together may race to generate it: each writes a file of its own
    and links it into place, which fails for all but one; the others read the winner's.
    """
    if settings.secret is not None:
        return settings.secret.get_secret_value().encode()
    try:
        return _read_secret(secret_file)
    except FileNotFoundError:
        pass
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = secret_file.with_name(f".{secret_file.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        # Another process may have generated it first: then theirs is used.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, secret_file)
    finally:
        tmp.unlink(missing_ok=True)
    return _read_secret(secret_file)


def _read_secret(path: Path) -> bytes:
    value = path.read_text("utf-8").strip()
    if len(value) < 32:
        msg = f"{path}: the server key is shorter than 32 characters (delete it to regenerate)"
        raise ConfigurationError(msg)
    return value.encode()


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, *, field: str = "expires_in") -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` as a duration; the error names ``field``."""
    match = _DURATION.fullmatch(text)
    if match is None or int(match.group(1)) == 0:
        msg = f"{field}: expected a positive number and a unit s, m, h, d or w (30d), got {text!r}"
        raise InvalidRequestError(msg)
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
