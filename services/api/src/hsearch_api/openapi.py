"""The API's OpenAPI document as a file: ``python -m hsearch_api.openapi [PATH]``.

It writes what a server on the default settings serves at ``/openapi.json`` (the
search limits, the registered legs: a server configured otherwise serves another
document), none of the environment's ``HSEARCH_*`` variables read, so the file is the
same on every machine. The TypeScript client's types are generated from it
(``clients/typescript/openapi.json``, then ``npm run generate`` there), and a test fails
when the committed file no longer matches the app (tests/unit/api/test_openapi_export.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hsearch.config import Settings
from hsearch_api.main import create_app

DEFAULT_PATH = Path("clients/typescript/openapi.json")
"""Where the document goes when no path is given (from the repository's root)."""


def openapi_document() -> dict[str, Any]:
    """The document of the app on the default settings (the fields' defaults only:
    ``model_construct`` reads neither the environment nor a ``.env`` file)."""
    return create_app(Settings.model_construct()).openapi()


def render(document: dict[str, Any]) -> str:
    """The file's text: indented, keys in the app's order (the generated types follow
    it), one newline at the end."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else DEFAULT_PATH
    path.write_text(render(openapi_document()), encoding="utf-8")
    print(f"wrote {path}")  # noqa: T201 - a command's one line of output


if __name__ == "__main__":
    main()
