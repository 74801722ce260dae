"""Model checkpoints on disk: completeness checks and content fingerprints.

A model's version is what it computes with, not where it lives, so the same checkpoint
in another directory is the same version."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

# Files at most this large are hashed whole; larger ones (the weights) by size plus
# three sampled windows, so the fingerprint costs milliseconds on a 2 GB checkpoint yet
# still changes with a fine-tune (which keeps the size but changes every tensor).
HASH_WHOLE_LIMIT = 32 * 2**20
HASH_WINDOW = 2**20


def file_digest(path: Path, *, label: str) -> bytes:
    """SHA-256 of ``label``, the file's size and its content (sampled when large)."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{label}\0{size}\0".encode())
    with path.open("rb") as handle:
        if size <= HASH_WHOLE_LIMIT:
            digest.update(handle.read())
        else:
            for offset in (0, (size - HASH_WINDOW) // 2, size - HASH_WINDOW):
                handle.seek(offset)
                digest.update(handle.read(HASH_WINDOW))
    return digest.digest()


def fingerprint(files: Iterable[tuple[str, Path]], *, extra: str = "") -> str:
    """16 hex digits over ``(label, path)`` pairs, in the order given, and ``extra``."""
    digest = hashlib.sha256(b"".join(file_digest(path, label=label) for label, path in files))
    if extra:
        digest.update(extra.encode())
    return digest.hexdigest()[:16]


def missing_checkpoint_files(
    path: Path, *, required: Sequence[str], alternatives: Sequence[Sequence[str]] = ()
) -> list[str]:
    """Which files are absent from ``path`` (empty: complete). Each group of
    ``alternatives`` needs one of its files and is reported as ``a|b``."""
    if not path.is_dir():
        return [f"{path} (not a directory)"]
    missing = [name for name in required if not (path / name).is_file()]
    for group in alternatives:
        if not any((path / name).is_file() for name in group):
            missing.append("|".join(group))
    return missing
