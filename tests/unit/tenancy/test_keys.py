"""Key format, hash and server key: high-entropy keys, found by a public prefix,
stored as an HMAC under the server key, which the embedded profile generates once."""

from __future__ import annotations

import stat
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from hsearch.config import AuthSettings
from hsearch.errors import ConfigurationError, InvalidCredentialError, InvalidRequestError
from hsearch.tenancy.keys import (
    generate_key,
    key_hmac,
    load_server_key,
    matches,
    parse_duration,
    parse_key,
)
from hsearch.types import CredentialRole

SERVER_KEY = b"k" * 32


def test_a_key_carries_its_role_marker_a_public_prefix_and_a_256_bit_secret() -> None:
    issued = generate_key(CredentialRole.TENANT)
    marker, prefix_hex, secret = issued.key.split("_", 2)
    assert marker == "hsk"
    assert issued.prefix == f"hsk_{prefix_hex}"
    assert len(prefix_hex) == 12
    assert len(secret) == 43  # token_urlsafe(32): 32 random bytes
    assert generate_key(CredentialRole.OPERATOR).key.startswith("hso_")
    parsed = parse_key(issued.key)
    assert (parsed.role, parsed.prefix) == (CredentialRole.TENANT, issued.prefix)


def test_keys_do_not_repeat() -> None:
    keys = [generate_key(CredentialRole.TENANT) for _ in range(200)]
    assert len({k.key for k in keys}) == 200
    assert len({k.prefix for k in keys}) == 200


def test_no_representation_shows_the_secret() -> None:
    issued = generate_key(CredentialRole.TENANT)
    secret = issued.key.split("_", 2)[2]
    assert secret not in repr(issued)
    assert secret not in repr(parse_key(issued.key))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "hsk_abc_def",
        "hsx_0123456789ab_" + "a" * 43,  # unknown marker
        "hsk_0123456789AB_" + "a" * 43,  # prefix not lower hex
        "hsk_0123456789ab_" + "a" * 42,  # secret too short
        "hsk_0123456789ab_" + "a" * 43 + "\n",
    ],
)
def test_a_malformed_key_is_refused_without_repeating_it(text: str) -> None:
    with pytest.raises(InvalidCredentialError) as caught:
        parse_key(text)
    assert (text.strip() or "§") not in caught.value.message


def test_the_stored_hash_is_an_hmac_under_the_server_key() -> None:
    key = generate_key(CredentialRole.TENANT).key
    stored = key_hmac(SERVER_KEY, key)
    assert len(stored) == 64
    assert matches(SERVER_KEY, key, stored)
    assert not matches(b"x" * 32, key, stored)  # another server key: no match
    assert not matches(SERVER_KEY, key[:-1] + ("A" if key[-1] != "A" else "B"), stored)


def test_the_configured_server_key_is_used_as_given(tmp_path: Path) -> None:
    settings = AuthSettings(secret=SecretStr("s" * 40))
    assert load_server_key(settings, secret_file=tmp_path / "auth-secret") == b"s" * 40
    assert not (tmp_path / "auth-secret").exists()


def test_a_short_configured_server_key_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"auth\.secret: at least 32"):
        AuthSettings(secret=SecretStr("short"))


def test_the_embedded_server_key_is_generated_once_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / "auth-secret"
    first = load_server_key(AuthSettings(), secret_file=path)
    assert len(first) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_server_key(AuthSettings(), secret_file=path) == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["auth-secret"]  # no temp left


def test_processes_racing_to_generate_the_server_key_all_get_the_same(tmp_path: Path) -> None:
    path = tmp_path / "auth-secret"
    got: list[bytes] = []
    start = threading.Barrier(8)

    def load() -> None:
        start.wait()
        got.append(load_server_key(AuthSettings(), secret_file=path))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8
    assert len(set(got)) == 1


def test_a_truncated_server_key_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "auth-secret"
    path.write_text("abc\n")
    with pytest.raises(ConfigurationError, match="delete it to regenerate"):
        load_server_key(AuthSettings(), secret_file=path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("2w", timedelta(weeks=2)),
        ("45s", timedelta(seconds=45)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "0d", "-1d", "1y", "1.5h"])
def test_bad_durations_name_the_field(text: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"^--expires-in: "):
        parse_duration(text, field="--expires-in")
