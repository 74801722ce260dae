"""Static checks of the full-stack packaging: docker-compose.yml and the Dockerfile.

Nothing here starts a container. The compose file is validated against the Compose
Specification JSON schema (vendored in tests/fixtures, see its README), after the
same `${VAR:-default}` interpolation Compose performs, and then held to the house
rules: every service the code talks to is there, start-up order is expressed with
health conditions, every long-running service has a healthcheck, every variable has a
default and every image is pinned. The Dockerfile's and compose file's commands must
name modules that exist in the source tree.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
SCHEMA_FILE = ROOT / "tests" / "fixtures" / "compose-spec.json"

REQUIRED_SERVICES = {"milvus", "etcd", "minio", "postgres", "redis", "migrate", "api", "worker"}
APP_SERVICES = {"migrate", "api", "worker"}  # built from this repository's Dockerfile
ONE_SHOT_SERVICES = {"migrate"}  # run to completion; everything else is long-running
CONNECTION_SETTINGS = {"HSEARCH_DATABASE__URL", "HSEARCH_REDIS__URL", "HSEARCH_MILVUS__URI"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}

# `$$` is an escaped dollar; `${...}` and `$NAME` are interpolations.
_DOLLAR = re.compile(r"\$(\$|\{(?P<braced>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
_WITH_DEFAULT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*):?-(?P<default>.*)$", re.DOTALL)
# `package.module:attribute`, as uvicorn and celery take it.
_MODULE_REF = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*)$")


def interpolation_errors(text: str) -> list[str]:
    """Every interpolation in `text` that has no default value."""
    errors = []
    for match in _DOLLAR.finditer(text):
        if match.group(1) == "$":
            continue
        if match.group("bare") is not None:
            errors.append(f"${match.group('bare')} (use ${{NAME:-default}})")
        elif not _WITH_DEFAULT.match(match.group("braced")):
            errors.append(f"${{{match.group('braced')}}}")
    return errors


def interpolate_defaults(text: str) -> str:
    """Resolve every interpolation as Compose does when no variable is set."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        braced = match.group("braced")
        parsed = _WITH_DEFAULT.match(braced) if braced is not None else None
        # An unset variable without a default becomes "" (Compose warns);
        # test_every_variable_has_a_default reports it.
        return parsed.group("default") if parsed is not None else ""

    return _DOLLAR.sub(substitute, text)


def load_compose() -> dict[str, Any]:
    """The compose file as Compose sees it with no variables set."""
    loaded = yaml.safe_load(interpolate_defaults(COMPOSE_FILE.read_text(encoding="utf-8")))
    assert isinstance(loaded, dict)
    return loaded


def load_compose_raw() -> dict[str, Any]:
    """The compose file before interpolation (to see which values are configurable)."""
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def environment_names(service: dict[str, Any]) -> set[str]:
    env = service.get("environment") or {}
    if isinstance(env, dict):
        return set(env)
    return {entry.split("=", 1)[0] for entry in env}


def as_argv(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(arg) for arg in command]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, arguments = full.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def dockerfile_commands() -> list[list[str]]:
    commands = []
    for keyword, arguments in dockerfile_instructions():
        if keyword in {"CMD", "ENTRYPOINT"}:
            commands.append(
                json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)
            )
    return commands


def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def app_commands() -> list[list[str]]:
    """Every command line the app image runs: its CMD and each app service's command."""
    services = load_compose()["services"]
    commands = dockerfile_commands()
    for name in sorted(APP_SERVICES & set(services)):
        if "command" in services[name]:
            commands.append(as_argv(services[name]["command"]))
    return commands


def module_refs() -> list[str]:
    """`module:attr` references named by the app's command lines (console scripts resolved)."""
    scripts: dict[str, str] = pyproject()["project"].get("scripts", {})
    refs: set[str] = set()
    for argv in app_commands():
        if argv and argv[0] in scripts:
            refs.add(scripts[argv[0]])
        refs.update(arg for arg in argv if _MODULE_REF.match(arg))
    return sorted(refs)


def image_is_pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return bool(tag) and tag != "latest"


# --- the schema itself -------------------------------------------------------


def test_vendored_schema_is_a_valid_draft7_schema() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert "draft-07" in schema["$schema"]
    assert schema["title"] == "Compose Specification"
    jsonschema.Draft7Validator.check_schema(schema)


def test_compose_file_matches_the_compose_specification() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(load_compose()), key=lambda e: list(e.absolute_path))
    described = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]
    assert not described, "\n".join(described)


def test_schema_check_rejects_an_unknown_service_key() -> None:
    # Guards the guard: a schema that accepted anything would make the test above vacuous.
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    broken = {"services": {"api": {"image": "x:1", "helthcheck": {}}}}
    assert not jsonschema.Draft7Validator(schema).is_valid(broken)


# --- the house rules ---------------------------------------------------------


def test_every_service_the_code_needs_is_present() -> None:
    missing = REQUIRED_SERVICES - set(load_compose()["services"])
    assert not missing, f"missing services: {sorted(missing)}"


@pytest.mark.parametrize("service", ["api", "worker"])
def test_app_services_get_the_connection_settings(service: str) -> None:
    names = environment_names(load_compose()["services"][service])
    missing = CONNECTION_SETTINGS - names
    assert not missing, f"{service} lacks {sorted(missing)}"


def test_app_services_point_at_the_compose_services() -> None:
    services = load_compose()["services"]
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert "@postgres:5432/" in env["HSEARCH_DATABASE__URL"]
        assert env["HSEARCH_DATABASE__URL"].startswith("postgresql+psycopg://")
        assert env["HSEARCH_REDIS__URL"].startswith("redis://redis:6379/")
        assert env["HSEARCH_MILVUS__URI"] == "http://milvus:19530"
        assert env["HSEARCH_ENCODER__KIND"] == "bge-m3"
        assert env["HSEARCH_ENCODER__BGE_M3_PATH"] == "/models/bge-m3"


def test_app_services_are_built_from_the_repository_dockerfile() -> None:
    services = load_compose()["services"]
    for name in sorted(APP_SERVICES):
        build = services[name].get("build")
        context = build.get("context") if isinstance(build, dict) else build
        assert context == ".", f"{name} must be built from the repository root"
    assert DOCKERFILE.is_file()


def test_every_dependency_exists_and_has_a_condition() -> None:
    services = load_compose()["services"]
    problems = []
    for name, service in services.items():
        depends_on = service.get("depends_on", {})
        if isinstance(depends_on, list):
            problems.append(f"{name}: depends_on is a list; use the long form with conditions")
            continue
        for target, spec in depends_on.items():
            if target not in services:
                problems.append(f"{name} -> {target}: no such service")
                continue
            condition = (spec or {}).get("condition")
            if condition not in CONDITIONS:
                problems.append(f"{name} -> {target}: condition {condition!r}")
            elif condition == "service_healthy" and "healthcheck" not in services[target]:
                problems.append(f"{name} -> {target}: waits for health the target never reports")
            elif condition == "service_completed_successfully" and target not in ONE_SHOT_SERVICES:
                problems.append(f"{name} -> {target}: waits for a long-running service to exit")
    assert not problems, "\n".join(problems)


def test_the_app_waits_for_migrations_and_healthy_backends() -> None:
    services = load_compose()["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "worker"):
        depends_on = services[name]["depends_on"]
        assert depends_on["migrate"]["condition"] == "service_completed_successfully"
        for backend in ("milvus", "redis"):
            assert depends_on[backend]["condition"] == "service_healthy", f"{name} -> {backend}"


def test_every_long_running_service_has_a_healthcheck() -> None:
    services = load_compose()["services"]
    lacking = []
    for name, service in services.items():
        if name in ONE_SHOT_SERVICES:
            continue
        healthcheck = service.get("healthcheck") or {}
        if healthcheck.get("disable") or not healthcheck.get("test"):
            lacking.append(name)
    assert not lacking, f"no healthcheck: {lacking}"


def test_one_shot_services_are_not_restarted() -> None:
    services = load_compose()["services"]
    for name in ONE_SHOT_SERVICES:
        assert services[name].get("restart") == "no", f"{name} would be restarted after exiting"


def test_api_healthcheck_probes_liveness_endpoint() -> None:
    test = load_compose()["services"]["api"]["healthcheck"]["test"]
    assert "http://127.0.0.1:8000/healthz" in " ".join(as_argv(test))


def test_every_variable_has_a_default() -> None:
    errors = interpolation_errors(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert not errors, f"interpolations without a default: {errors}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A:-x}", []),
        ("${A-x}", []),
        ("$${HOSTNAME} $$HOME", []),
        ("${A}", ["${A}"]),
        ("${A:?required}", ["${A:?required}"]),
        ("$A", ["$A (use ${NAME:-default})"]),
    ],
)
def test_interpolation_check(text: str, expected: list[str]) -> None:
    assert interpolation_errors(text) == expected


def test_interpolation_resolves_defaults_and_escapes() -> None:
    assert (
        interpolate_defaults("${A:-./models}:/models $$HOSTNAME ${B-}")
        == "./models:/models $HOSTNAME "
    )


def test_images_are_pinned() -> None:
    services = load_compose()["services"]
    unpinned = []
    for name, service in services.items():
        image = service.get("image")
        if image is None:
            if "build" not in service:
                unpinned.append(f"{name}: neither image nor build")
        elif not image_is_pinned(image):
            unpinned.append(f"{name}: {image}")
    assert not unpinned, f"unpinned images: {unpinned}"


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("postgres:16", True),
        ("quay.io/coreos/etcd:v3.5.18", True),
        ("localhost:5000/hsearch:0.1.0", True),
        ("redis@sha256:" + "0" * 64, True),
        ("postgres", False),
        ("postgres:latest", False),
        ("localhost:5000/hsearch", False),
    ],
)
def test_image_pin_check(image: str, pinned: bool) -> None:
    assert image_is_pinned(image) is pinned


def test_worker_replicas_are_configurable() -> None:
    replicas = load_compose_raw()["services"]["worker"]["deploy"]["replicas"]
    assert isinstance(replicas, str), "replicas should come from a variable with a default"
    assert interpolation_errors(replicas) == []
    assert int(interpolate_defaults(replicas)) >= 1


def test_named_volumes_are_declared() -> None:
    compose = load_compose()
    declared = set(compose.get("volumes") or {})
    used = set()
    for service in compose["services"].values():
        for volume in service.get("volumes") or []:
            if isinstance(volume, dict):
                if volume.get("type") != "volume":
                    continue
                source = volume.get("source")
            else:
                source = volume.split(":")[0]
            if source and not source.startswith((".", "/", "~")):
                used.add(source)
    assert used, "no named volumes: state would be lost with the containers"
    assert used <= declared, f"undeclared volumes: {sorted(used - declared)}"


def test_models_are_mounted_read_only_from_a_configurable_directory() -> None:
    services = load_compose_raw()["services"]
    for name in ("api", "worker"):
        mounts = [
            (raw, interpolate_defaults(raw).split(":"))
            for raw in services[name]["volumes"]
            if isinstance(raw, str)
        ]
        models = [(raw, parts) for raw, parts in mounts if parts[1:2] == ["/models"]]
        assert len(models) == 1, f"{name} has no /models mount"
        raw, parts = models[0]
        assert raw.startswith("${HSEARCH_MODELS_DIR:-"), raw
        assert parts[2:] == ["ro"], f"{name} may write to the model weights"


# --- the Dockerfile ----------------------------------------------------------


def test_dockerfile_uses_slim_python_and_a_non_root_user() -> None:
    instructions = dockerfile_instructions()
    bases = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert bases[-1].split()[0] == "python:3.11-slim"
    users = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert users, "the image runs as root"
    assert users[-1] not in {"root", "0", "0:0"}


def test_dockerfile_installs_cpu_torch_before_the_project_and_no_dev_extras() -> None:
    runs = [arguments for keyword, arguments in dockerfile_instructions() if keyword == "RUN"]
    torch_step = next(i for i, run in enumerate(runs) if "torch==" in run)
    project_step = next(
        i for i, run in enumerate(runs) if re.search(r"pip install .*\s\.(\s|$)", run)
    )
    assert torch_step < project_step
    assert "whl/cpu" in DOCKERFILE.read_text(encoding="utf-8")
    assert not any("[dev]" in run for run in runs)


def _ignored(path: str, patterns: list[str]) -> bool:
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.removeprefix("!").strip("/")
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            ignored = not negate
    return ignored


def test_dockerfile_copies_sources_that_exist_and_are_not_ignored() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    problems = []
    for keyword, arguments in dockerfile_instructions():
        if keyword not in {"COPY", "ADD"} or arguments.startswith("--from"):
            continue
        *sources, _destination = arguments.split()
        for source in sources:
            if not (ROOT / source).exists():
                problems.append(f"{source}: not in the repository")
            elif _ignored(source, patterns):
                problems.append(f"{source}: excluded by .dockerignore")
    assert not problems, "\n".join(problems)


def test_dockerfile_sources_cover_every_package_root() -> None:
    copied = {
        arguments.split()[0]
        for keyword, arguments in dockerfile_instructions()
        if keyword == "COPY" and not arguments.startswith("--")
    }
    roots = pyproject()["tool"]["setuptools"]["packages"]["find"]["where"]
    assert set(roots) <= copied, f"package roots not copied: {sorted(set(roots) - copied)}"


def test_app_commands_run_programs_the_project_installs() -> None:
    project = pyproject()["project"]
    scripts = set(project.get("scripts", {}))
    distributions = {
        re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in project["dependencies"]
    }
    for argv in app_commands():
        program = argv[0]
        assert program in scripts or program in distributions, f"{program}: not installed"


def test_app_commands_name_at_least_the_api_worker_and_cli() -> None:
    refs = module_refs()
    assert "hsearch_api.main:create_app" in refs
    assert "hsearch_ingest.celery_app:app" in refs
    # `hsearch db upgrade` (the migrate service) goes through the console script.
    assert pyproject()["project"]["scripts"]["hsearch"] in refs


@pytest.mark.parametrize("ref", module_refs())
def test_app_command_modules_exist_in_the_source_tree(ref: str) -> None:
    # e.g. hsearch_api.main:create_app -> services/api/src/hsearch_api/main.py defines
    # create_app; the console script behind `hsearch db upgrade` is checked the same way.
    parsed = _MODULE_REF.match(ref)
    assert parsed is not None
    module_path = Path(*parsed.group("module").split("."))
    roots = pyproject()["tool"]["setuptools"]["packages"]["find"]["where"]
    candidates = [
        ROOT / root / path
        for root in roots
        for path in (module_path.with_suffix(".py"), module_path / "__init__.py")
    ]
    found = [candidate for candidate in candidates if candidate.is_file()]
    assert found, (
        f"{parsed.group('module')}: none of {[str(c.relative_to(ROOT)) for c in candidates]}"
    )
    attr = re.escape(parsed.group("attr"))
    defined = re.compile(
        rf"^(?:(?:async\s+)?def|class)\s+{attr}\b|^{attr}\s*[:=]|^from\s+\S+\s+import\s+.*\b{attr}\b",
        re.MULTILINE,
    )
    assert defined.search(found[0].read_text(encoding="utf-8")), (
        f"{found[0].relative_to(ROOT)} does not define {parsed.group('attr')}"
    )
