"""The token format: a round trip, and every way a token is refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest

from hsearch.errors import ExpiredTokenError, InvalidFilterError, InvalidTokenError
from hsearch.tenancy.tokens import (
    TOKEN_AUDIENCE,
    TokenLimits,
    decode_token,
    encode_token,
    looks_like_token,
    parse_token_filter,
    token_signing_key,
)
from hsearch.vectorstore.filters import parse_filter

KEY = token_signing_key(b"s" * 32)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
FILTER = {"tags": {"contains_any": ["team-a"]}}
KEY_ID = uuid.uuid4()


def token(**overrides: Any) -> str:
    claims: dict[str, Any] = {
        "key_id": KEY_ID,
        "tenant_id": "acme",
        "filter": FILTER,
        "limits": TokenLimits(max_top_k=7),
        "issued_at": NOW,
        "expires_at": NOW + timedelta(minutes=5),
    }
    return encode_token(KEY, **{**claims, **overrides})


def test_round_trip() -> None:
    decoded = decode_token(KEY, token(), now=NOW)
    assert decoded.key_id == KEY_ID
    assert decoded.tenant_id == "acme"
    assert decoded.filter == parse_filter(FILTER)
    assert decoded.limits == TokenLimits(max_top_k=7)
    assert decoded.expires_at == NOW + timedelta(minutes=5)
    assert looks_like_token(token())
    assert not looks_like_token("hsk_0123456789ab_" + "a" * 43)
    assert "acme" not in repr(decoded).replace("tenant_id='acme'", "")


def test_the_signing_key_is_not_the_server_key() -> None:
    assert token_signing_key(b"s" * 32) != b"s" * 32
    assert token_signing_key(b"s" * 32) != token_signing_key(b"t" * 32)


def test_expiry_is_exact() -> None:
    assert decode_token(KEY, token(), now=NOW + timedelta(minutes=4, seconds=59))
    with pytest.raises(ExpiredTokenError):
        decode_token(KEY, token(), now=NOW + timedelta(minutes=5))


def test_a_clock_slightly_ahead_where_it_was_minted_is_tolerated() -> None:
    minted_ahead = token(issued_at=NOW + timedelta(seconds=10))
    assert decode_token(KEY, minted_ahead, now=NOW).tenant_id == "acme"


def _raw(claims: dict[str, Any], key: bytes = KEY, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=algorithm)


GOOD = {
    "iss": "hsearch",
    "aud": TOKEN_AUDIENCE,
    "sub": str(KEY_ID),
    "tid": "acme",
    "flt": FILTER,
    "iat": int(NOW.timestamp()),
    "exp": int((NOW + timedelta(minutes=5)).timestamp()),
}


@pytest.mark.parametrize(
    "bad",
    [
        _raw(GOOD, key=b"another key of 32 bytes or more!"),
        _raw({**GOOD, "aud": "someone else"}),
        _raw({**GOOD, "iss": "someone else"}),
        _raw({k: v for k, v in GOOD.items() if k != "exp"}),
        _raw({k: v for k, v in GOOD.items() if k != "tid"}),
        _raw({**GOOD, "tid": ""}),
        _raw({**GOOD, "sub": "not a uuid"}),
        _raw({**GOOD, "flt": {}}),
        _raw({**GOOD, "flt": {"tenant_id": {"eq": "other"}}}),
        _raw({**GOOD, "lim": {"max_top_k": 0}}),
        _raw({**GOOD, "lim": "big"}),
        _raw(GOOD, key=KEY * 2, algorithm="HS512"),
        "a.b.c",
    ],
)
def test_refused(bad: str) -> None:
    with pytest.raises(InvalidTokenError, match="invalid search token"):
        decode_token(KEY, bad, now=NOW)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"tenant_id": {"eq": "x"}},
        {"ordinal": {"eq": 0}},
        {"and": [FILTER, {"ordinal": {"gt": 1}}]},
    ],
)
def test_a_token_filter_is_required_and_selects_documents(raw: object) -> None:
    with pytest.raises(InvalidFilterError):
        parse_token_filter(raw)
