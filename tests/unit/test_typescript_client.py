"""The TypeScript client (``clients/typescript``) keeps up with the API, without node:
its ``openapi.json`` is the app's current OpenAPI document (its generated types are
checked against that document by tests/integration/test_typescript_client.py, with
node), and its error classes map the stable codes and statuses as the Python client's
do. A route, a field or an error code added to the API without the client fails here."""

from __future__ import annotations

import re
from pathlib import Path

from hsearch_api.openapi import openapi_document, render
from hsearch_client import errors as python_errors

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
REFRESH = (
    "from the repository's root: python -m hsearch_api.openapi, "
    "then npm run generate in clients/typescript"
)


def test_the_committed_openapi_document_is_the_apps() -> None:
    committed = (PACKAGE / "openapi.json").read_text("utf-8")
    assert committed == render(openapi_document()), (
        f"clients/typescript/openapi.json is stale: {REFRESH}"
    )


def block(source: str, start: str) -> str:
    """The text of ``source`` from the line holding ``start`` to the next ``}``/``]);``."""
    found = re.search(
        re.escape(start) + r"(.*?)^(?:\};|\]\);)", source, flags=re.DOTALL | re.MULTILINE
    )
    assert found is not None, start
    return found.group(1)


def test_the_error_classes_are_the_python_clients() -> None:
    source = (PACKAGE / "src" / "errors.ts").read_text("utf-8")
    by_code = dict(re.findall(r"^\s+(\w+): (\w+Error),$", block(source, "ERROR_CLASSES"), re.M))
    expected = {code: cls.__name__ for code, cls in python_errors._BY_CODE.items()}
    assert by_code == expected
    by_status = {
        int(s): c for s, c in re.findall(r"\[(\d+), (\w+Error)\]", block(source, "BY_STATUS"))
    }
    assert by_status == {status: cls.__name__ for status, cls in python_errors._BY_STATUS.items()}
    # Each class under the same parent, with the same status.
    parents = dict(re.findall(r"^export class (\w+) extends (\w+)", source, re.M))
    statuses = dict(
        re.findall(
            r"^export class (\w+) extends \w+ \{\n"
            r"\s+static override readonly statusCode: number = (\d+);",
            source,
            re.M,
        )
    )
    for name in {*by_code.values(), *by_status.values()}:
        cls = getattr(python_errors, name)
        assert parents[name] == cls.__bases__[0].__name__, name
        if "status_code" in vars(cls):
            assert int(statuses[name]) == cls.status_code, name


def test_the_readme_has_examples_of_each_method() -> None:
    readme = (PACKAGE / "README.md").read_text("utf-8")
    examples = "\n".join(re.findall(r"^```ts(?: browser)?\n(.*?)^```$", readme, flags=re.S | re.M))
    for method in (
        "search",
        "searchPages",
        "listDocuments",
        "getDocumentLinks",
        "answer",
        "answerStream",
        "submitDocuments",
        "createToken",
        "getDocument",
    ):
        assert f".{method}(" in examples, method
