"""Static checks of infra/: Kubernetes manifests, Milvus Helm values, Prometheus
configuration and alert rules, Grafana provisioning and dashboard.

No cluster, Prometheus or Grafana runs here. Each file goes through a real validator:
the Kubernetes manifests through `kubernetes-validate` (the Kubernetes OpenAPI schemas,
strict: unknown fields are errors), the Prometheus configuration and rules through
`promtool` (Debian's `prometheus` package; `.ci/run` installs it), whose `test rules`
runs alerts.test.yml's series through the rules. The Helm values are checked against
the chart's key list vendored beside them (no helm binary installs here). The compose
services that run Prometheus and Grafana are checked in test_compose.py's way, through
Compose itself. What stays here are this project's own rules on top.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from hsearch.config import Settings
from hsearch.metrics import exposition, instruments
from hsearch.types import JobStatus
from tests.unit.test_compose import load_compose

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
K8S = INFRA / "kubernetes"
PROMETHEUS = INFRA / "prometheus"
GRAFANA = INFRA / "grafana"
MILVUS_VALUES = INFRA / "helm" / "milvus" / "values.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
IN_CI = os.environ.get("CI") == "true"

# The oldest Kubernetes the manifests support and the newest the validator knows.
K8S_VERSIONS = ("1.30", kubernetes_validate.latest_version())

# The metric names the application exports (prefixed hsearch_; docs/operations.md,
# Metrics), with their types: what the dashboard and the alerts may query.
METRICS = {
    "hsearch_http_requests_total": "counter",
    "hsearch_http_request_duration_seconds": "histogram",
    "hsearch_search_requests_total": "counter",
    "hsearch_search_leg_duration_seconds": "histogram",
    "hsearch_search_leg_outcomes_total": "counter",
    "hsearch_search_stage_duration_seconds": "histogram",
    "hsearch_cache_requests_total": "counter",
    "hsearch_ingest_documents_total": "counter",
    "hsearch_ingest_chunks_total": "counter",
    "hsearch_jobs": "gauge",
    "hsearch_queue_depth": "gauge",
    "hsearch_time_to_searchable_seconds": "histogram",
    "hsearch_dependency_up": "gauge",
    "hsearch_build_info": "gauge",
    "hsearch_answer_requests_total": "counter",
    "hsearch_answer_duration_seconds": "histogram",
    "hsearch_answer_first_token_seconds": "histogram",
    "hsearch_answer_tokens_total": "counter",
    "hsearch_answer_sentences_total": "counter",
}
# Their labels, with the values a query may match where the set is closed.
LEGS = {"dense", "sparse"}
METRIC_LABELS: dict[str, dict[str, set[str] | None]] = {
    "hsearch_http_requests_total": {"route": None, "method": None, "status": None},
    "hsearch_http_request_duration_seconds": {"route": None, "method": None},
    "hsearch_search_requests_total": {
        "mode": None,
        "outcome": {"ok", "degraded", "error"},
        "tenant": None,
    },
    "hsearch_search_leg_duration_seconds": {"leg": LEGS, "tenant": None},
    "hsearch_search_leg_outcomes_total": {
        "leg": LEGS,
        "status": {"ok", "timeout", "error", "skipped"},
    },
    "hsearch_search_stage_duration_seconds": {"stage": None},
    "hsearch_cache_requests_total": {
        "cache": {"result", "embedding"},
        "result": {"hit", "miss", "error"},
    },
    "hsearch_ingest_documents_total": {"outcome": {"indexed", "skipped", "failed", "deleted"}},
    "hsearch_ingest_chunks_total": {},
    "hsearch_jobs": {"status": {str(status) for status in JobStatus}},
    "hsearch_queue_depth": {"queue": None},
    "hsearch_time_to_searchable_seconds": {},
    "hsearch_dependency_up": {"component": {"database", "milvus", "encoder", "broker", "redis"}},
    "hsearch_build_info": {"version": None, "encoder": None},
    "hsearch_answer_requests_total": {
        "model": None,
        "outcome": {"answered", "degraded"},
        "tenant": None,
    },
    "hsearch_answer_duration_seconds": {"model": None},
    "hsearch_answer_first_token_seconds": {"model": None},
    "hsearch_answer_tokens_total": {"model": None, "direction": {"in", "out"}, "tenant": None},
    "hsearch_answer_sentences_total": {"model": None, "support": {"supported", "unsupported"}},
}
# Labels Prometheus adds to every series (target and Kubernetes metadata).
TARGET_LABELS = {"job", "instance", "namespace", "pod"}
# Prometheus's own series, written for every target.
PROMETHEUS_SERIES = {"up"}
# The /ops page's panels, which the Grafana dashboard shows too.
OPS_PANELS = {
    "Searches/s",
    "Latency per leg (p50, p95)",
    "Cache hit ratio",
    "Degraded searches",
    "Ingest throughput",
    "Queue depth",
    "Job states",
    "Answers/s",
    "Unsupported answer sentences (share)",
}
# Env values that must come from a Secret, never from a literal or the ConfigMap.
SECRET_SETTINGS = re.compile(
    r"(SECRET|TOKEN|PASSWORD|API_KEY|DATABASE__URL|REDIS__URL|BROKER__URL)"
)


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def manifests() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml_documents(path)
    ]


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    return spec


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- Kubernetes: the validator ----------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(("name", "doc"), manifests(), ids=[n for n, _ in manifests()])
def test_manifest_is_valid_kubernetes(name: str, doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.process
def test_the_validator_rejects_a_misspelt_field() -> None:
    # Guards the guard: strict validation must fail on a field Kubernetes does not know.
    deployment = of_kind("Deployment")["hsearch-api"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


# --- Kubernetes: this project's rules ---------------------------------------------------


def test_api_and_workers_are_deployed_with_a_migration_job() -> None:
    assert set(of_kind("Deployment")) == {"hsearch-api", "hsearch-worker"}
    (job,) = of_kind("Job").values()
    (container,) = containers(job)
    assert container["command"] == ["hsearch", "db", "upgrade"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_every_container_has_resource_requests_and_limits() -> None:
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            for container in containers(workload):
                resources = container.get("resources", {})
                for bound in ("requests", "limits"):
                    assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{name} {bound}"


def test_api_probes_liveness_on_healthz_and_readiness_on_readyz() -> None:
    (api,) = containers(of_kind("Deployment")["hsearch-api"])
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["port"] in ports
    assert ports[api["readinessProbe"]["httpGet"]["port"]] == 8000


def test_workers_serve_metrics_on_the_configured_port() -> None:
    config = of_kind("ConfigMap")["hsearch-config"]["data"]
    worker = of_kind("Deployment")["hsearch-worker"]
    (container,) = containers(worker)
    port = int(config["HSEARCH_METRICS__WORKER_PORT"])
    assert config["HSEARCH_METRICS__WORKER_HOST"] == "0.0.0.0"
    assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container["ports"]
    assert worker["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(port)


def test_the_multiprocess_metrics_directory_is_writable_in_every_pod() -> None:
    # prometheus-client writes its files there from the first metric on: a read-only
    # root filesystem needs a volume at that path in every pod that has the setting.
    path = of_kind("ConfigMap")["hsearch-config"]["data"]["PROMETHEUS_MULTIPROC_DIR"]
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
            for container in containers(workload):
                mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
                assert path in mounts, f"{name}: {path} is not mounted"
                assert "emptyDir" in volumes[mounts[path]["name"]], f"{name}: not emptied at start"
                assert not mounts[path].get("readOnly"), name


def test_every_deployment_is_autoscaled_and_has_a_disruption_budget() -> None:
    hpas = of_kind("HorizontalPodAutoscaler").values()
    autoscalers = {hpa["spec"]["scaleTargetRef"]["name"]: hpa for hpa in hpas}
    budgets = list(of_kind("PodDisruptionBudget").values())
    for name, deployment in of_kind("Deployment").items():
        hpa = autoscalers[name]
        assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
        assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        covering = [b for b in budgets if selects(b["spec"]["selector"]["matchLabels"], labels)]
        assert len(covering) == 1, f"{name}: {len(covering)} disruption budgets"
        assert selects(deployment["spec"]["selector"]["matchLabels"], labels)
    assert autoscalers["hsearch-api"]["spec"]["minReplicas"] >= 2, "one API pod is a single point"


def test_the_service_reaches_the_api_pods_on_a_named_port() -> None:
    service = of_kind("Service")["hsearch-api"]
    api = of_kind("Deployment")["hsearch-api"]
    assert selects(service["spec"]["selector"], api["spec"]["template"]["metadata"]["labels"])
    (container,) = containers(api)
    names = {p["name"] for p in container["ports"]}
    assert all(p["targetPort"] in names for p in service["spec"]["ports"])


def _env_sources() -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            for container in containers(workload):
                for env in container.get("env", []):
                    yield f"{name}/{env['name']}", env


def test_settings_come_from_the_configmap_and_credentials_from_a_secret() -> None:
    configmaps = of_kind("ConfigMap")
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            for container in containers(workload):
                refs = [e["configMapRef"]["name"] for e in container.get("envFrom", [])]
                assert refs, f"{name}: no settings from a ConfigMap"
                assert all(ref in configmaps for ref in refs), f"{name}: {refs}"
                names = {e["name"] for e in container.get("env", [])}
                assert "HSEARCH_DATABASE__URL" in names, f"{name}: no database credential"
    for where, env in _env_sources():
        if SECRET_SETTINGS.search(env["name"]):
            assert "value" not in env, f"{where} is a literal"
            assert env["valueFrom"]["secretKeyRef"]["name"] == "hsearch-secrets", where
    for name, configmap in configmaps.items():
        leaked = [key for key in configmap["data"] if SECRET_SETTINGS.search(key)]
        assert not leaked, f"ConfigMap {name} holds credentials: {leaked}"
    assert not of_kind("Secret"), "a Secret manifest would put credentials in the repository"


def test_the_secret_keys_are_documented() -> None:
    keys = {
        env["valueFrom"]["secretKeyRef"]["key"]
        for _, env in _env_sources()
        if "secretKeyRef" in env.get("valueFrom", {})
    }
    text = OPERATIONS.read_text(encoding="utf-8")
    assert all(f"--from-literal={key}=" in text for key in keys), sorted(keys)


def _setting_exists(key: str) -> bool | None:
    """Whether HSEARCH_SECTION__FIELD names a field of the Settings (None: a section
    this checkout does not have yet)."""
    section, _, field = key.removeprefix("HSEARCH_").lower().partition("__")
    if section not in Settings.model_fields:
        return None
    if not field:
        return True
    model = Settings.model_fields[section].annotation
    return field in getattr(model, "model_fields", {})


def test_configmap_names_only_settings_that_exist() -> None:
    # Settings ignore unknown variables: a misspelt name would silently do nothing.
    data = of_kind("ConfigMap")["hsearch-config"]["data"]
    for key in (k for k in data if k.startswith("HSEARCH_")):
        exists = _setting_exists(key)
        # The metrics section comes with the /metrics change; checked once both are in.
        if exists is None and key.startswith("HSEARCH_METRICS__"):
            continue
        assert exists, f"{key} is not a setting"
    assert data["HSEARCH_API__MIGRATE_ON_START"] == "false", "the migration Job migrates"


@pytest.mark.process
def test_compose_app_environment_names_only_settings_that_exist() -> None:
    services = load_compose()["services"]
    for name in ("api", "worker", "migrate"):
        for key in services[name]["environment"]:
            if not key.startswith("HSEARCH_"):
                continue
            exists = _setting_exists(key)
            if exists is None and key.startswith("HSEARCH_METRICS__"):
                continue  # as above
            assert exists, f"{name}: {key} is not a setting"


def test_the_setting_check_catches_a_misspelt_name() -> None:
    assert _setting_exists("HSEARCH_API__PORT")
    assert _setting_exists("HSEARCH_LOG_LEVEL")
    assert not _setting_exists("HSEARCH_API__PROT")


@pytest.mark.process
def test_pods_run_as_the_image_user_without_privileges() -> None:
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            pod = workload["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["runAsUser"] == 10001, name  # the Dockerfile's user
            for container in containers(workload):
                assert container["securityContext"]["allowPrivilegeEscalation"] is False
                assert container["image"] == load_compose()["services"]["api"]["image"]


# --- Milvus Helm values ----------------------------------------------------------------


def chart_keys() -> tuple[dict[str, Any], set[str]]:
    (keys_file,) = MILVUS_VALUES.parent.glob("chart-*.keys")
    header, _, body = keys_file.read_text(encoding="utf-8").partition("---\n")
    meta = yaml.safe_load(header)
    return meta, {line.strip() for line in body.splitlines() if line.strip()}


def unknown_keys(values: dict[str, Any], keys: set[str]) -> list[str]:
    """Dotted paths of ``values`` the chart does not define (a path below a ``.*`` key
    is free)."""

    def walk(node: dict[str, Any], prefix: str) -> Iterator[str]:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            if isinstance(value, dict):
                yield from walk(value, path)

    def known(path: str) -> bool:
        parts = path.split(".")
        free = any(".".join(parts[:i]) + ".*" in keys for i in range(1, len(parts)))
        return path in keys or free

    return [path for path in walk(values, "") if not known(path)]


def milvus_values() -> dict[str, Any]:
    loaded = yaml.safe_load(MILVUS_VALUES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_milvus_values_use_only_keys_of_the_targeted_chart() -> None:
    meta, keys = chart_keys()
    assert meta["chart"] == "milvus"
    assert not unknown_keys(milvus_values(), keys)
    assert f"--version {meta['version']}" in MILVUS_VALUES.read_text(encoding="utf-8")


def test_the_key_check_reports_a_misspelt_key() -> None:
    _, keys = chart_keys()
    values = {"queryNode": {"replica": 2, "resources": {"limits": {"cpu": "1"}}}}
    assert unknown_keys(values, keys) == ["queryNode.replica"]


@pytest.mark.process
def test_milvus_runs_distributed_at_the_compose_version() -> None:
    meta, _ = chart_keys()
    values = milvus_values()
    image = load_compose()["services"]["milvus"]["image"]
    assert image == f"{values['image']['all']['repository']}:{values['image']['all']['tag']}"
    assert values["image"]["all"]["tag"] == f"v{meta['appVersion']}"
    assert values["cluster"]["enabled"] is True
    assert values["queryNode"]["replicas"] >= 2
    assert values["dataNode"]["replicas"] >= 2
    assert values["proxy"]["replicas"] >= 2
    assert values["etcd"]["replicaCount"] >= 3
    assert values["etcd"]["replicaCount"] % 2 == 1, "etcd needs an odd number for a quorum"
    assert values["minio"]["mode"] == "distributed"
    for component in ("proxy", "queryNode", "dataNode", "streamingNode", "mixCoordinator"):
        assert {"requests", "limits"} <= set(values[component]["resources"]), component


def test_milvus_has_exactly_one_message_queue() -> None:
    values = milvus_values()
    queues = [q for q in ("pulsarv3", "pulsar", "kafka", "woodpecker") if values[q]["enabled"]]
    assert queues == ["woodpecker"]
    assert values["streaming"]["enabled"] is True


def test_milvus_values_hold_no_credentials() -> None:
    values = milvus_values()
    for section in ("minio", "externalS3"):
        for key in ("accessKey", "secretKey"):
            assert key not in values.get(section, {}), f"{section}.{key} belongs in --set"


# --- Prometheus -------------------------------------------------------------------------


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool not installed (Debian package prometheus; .ci/run installs it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def run_promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, cwd=cwd, timeout=60, check=False
    )


@pytest.mark.process
def test_prometheus_config_is_valid() -> None:
    result = run_promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.process
def test_alert_rules_are_valid() -> None:
    result = run_promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.process
def test_alert_rules_pass_their_unit_tests() -> None:
    result = run_promtool("test", "rules", "alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.process
def test_rule_tests_fail_when_an_alert_does_not_fire(tmp_path: Path) -> None:
    # Guards the guard: a rule that never fires must fail its unit test.
    rules = yaml_documents(PROMETHEUS / "alerts.yml")[0]
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "HsearchHigh5xxRatio":
                rule["expr"] = "vector(1) < 0"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    shutil.copy(PROMETHEUS / "alerts.test.yml", tmp_path)
    result = run_promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "HsearchHigh5xxRatio" in result.stdout + result.stderr


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml_documents(PROMETHEUS / "alerts.yml")[0]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_alert_is_tested_firing_and_has_a_runbook_entry() -> None:
    tests = yaml_documents(PROMETHEUS / "alerts.test.yml")[0]["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }
    runbook = OPERATIONS.read_text(encoding="utf-8")
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in runbook.splitlines()
        if line.startswith("#")
    }
    for rule in alert_rules():
        name = rule["alert"]
        assert name in fired, f"{name}: no test shows it firing"
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        link = rule["annotations"]["runbook"]
        assert link == f"docs/operations.md#{name.lower()}", name
        assert name.lower() in headings, f"docs/operations.md has no section {name}"


@pytest.mark.process
def test_scrape_jobs_match_the_compose_services_and_the_alerts() -> None:
    config = yaml_documents(PROMETHEUS / "prometheus.yml")[0]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    services = load_compose()["services"]
    api = jobs["hsearch-api"]["dns_sd_configs"][0]
    worker = jobs["hsearch-worker"]["dns_sd_configs"][0]
    assert api["names"] == ["api"]
    assert api["port"] == int(services["api"]["environment"]["HSEARCH_API__PORT"])
    assert worker["names"] == ["worker"]
    assert worker["port"] == int(services["worker"]["environment"]["HSEARCH_METRICS__WORKER_PORT"])
    assert jobs["hsearch-api"]["metrics_path"] == "/metrics"
    named = {m for rule in alert_rules() for m in re.findall(r'job="([^"]+)"', rule["expr"])}
    assert named <= set(jobs), named - set(jobs)


# --- metric names in the dashboard and the alerts ---------------------------------------


def metric_names(expr: str) -> set[str]:
    """The series an expression selects (identifiers followed by a selector, a range or
    an operator; functions and label names are left out)."""
    without_labels = re.sub(r"\{[^}]*\}", "{}", expr)
    without_strings = re.sub(r'"[^"]*"', '""', without_labels)
    names = set(re.findall(r"\b(hsearch_\w+|up)\b(?!\s*\()", without_strings))
    grouping = set(re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", without_strings))
    labels = {label.strip() for group in grouping for label in group.split(",")}
    return names - labels


def unknown_metrics(expr: str) -> list[str]:
    unknown = []
    for name in metric_names(expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in METRICS or name in PROMETHEUS_SERIES:
            continue
        if base in METRICS and METRICS[base] == "histogram":
            continue
        unknown.append(name)
    return sorted(unknown)


def label_errors(expr: str) -> list[str]:
    """Label matchers of hsearch series that name a label the metric does not have, or
    a value outside the label's closed set (alternatives of =~ checked one by one)."""
    errors = []
    for name, matchers in re.findall(r"\b(hsearch_\w+)\{([^}]*)\}", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        labels = METRIC_LABELS.get(name, METRIC_LABELS.get(base, {}))
        allowed = {**labels, **dict.fromkeys(TARGET_LABELS)}
        if name.endswith("_bucket"):
            allowed["le"] = None
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
            if label not in allowed:
                errors.append(f"{name}: no label {label}")
                continue
            closed = allowed[label]
            values = value.split("|") if op in {"=~", "!~"} else [value]
            if closed is not None and any(v not in closed for v in values):
                errors.append(f"{name}: {label}{op}{value!r} outside {sorted(closed)}")
    return errors


def dashboard() -> dict[str, Any]:
    loaded = json.loads((GRAFANA / "dashboards" / "hsearch.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def dashboard_panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_dashboard_queries_only_agreed_metric_names() -> None:
    for panel in dashboard_panels():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert metric_names(target["expr"]), f"{panel['title']}: {target['expr']}"
            assert not unknown_metrics(target["expr"]), panel["title"]


def test_alerts_query_only_agreed_metric_names() -> None:
    for rule in alert_rules():
        assert not unknown_metrics(rule["expr"]), rule["alert"]


def test_dashboard_and_alerts_match_only_labels_and_values_the_metrics_have() -> None:
    exprs = [t["expr"] for p in dashboard_panels() for t in p["targets"]]
    exprs += [rule["expr"] for rule in alert_rules()]
    for expr in exprs:
        assert not label_errors(expr), expr


def test_the_label_check_catches_a_wrong_label_or_value() -> None:
    assert label_errors('rate(hsearch_search_requests_total{outcome="degrade"}[5m])')
    assert label_errors('hsearch_jobs{status=~"queued|stuck"}')
    assert label_errors('hsearch_queue_depth{tenant="a"}')
    assert not label_errors('hsearch_jobs{job="hsearch-api", status=~"queued|running"}')
    assert not label_errors('hsearch_http_request_duration_seconds_bucket{le="+Inf"}')


def test_the_name_check_catches_an_unknown_metric() -> None:
    expr = 'sum by (leg) (rate(hsearch_search_leg_seconds_bucket{leg="dense"}[5m]))'
    assert unknown_metrics(expr) == ["hsearch_search_leg_seconds_bucket"]
    assert unknown_metrics("rate(hsearch_jobs_bucket[5m])") == ["hsearch_jobs_bucket"]
    quantile = "histogram_quantile(0.5, rate(hsearch_time_to_searchable_seconds_bucket[5m]))"
    assert not unknown_metrics(quantile)


def test_dashboard_shows_the_ops_page_panels_from_the_provisioned_datasource() -> None:
    panels = dashboard_panels()
    missing = OPS_PANELS - {p["title"] for p in panels}
    assert not missing, missing
    datasources = yaml_documents(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[0]
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    uids = {p["datasource"]["uid"] for p in panels}
    uids |= {t["datasource"]["uid"] for p in panels for t in p["targets"]}
    assert uids == {source["uid"]}
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"


@pytest.mark.process
def test_compose_runs_prometheus_and_grafana_on_the_infra_files() -> None:
    services = load_compose()["services"]
    mounts = {
        name: {
            v["target"]: Path(v["source"]) for v in services[name]["volumes"] if v["type"] == "bind"
        }
        for name in ("prometheus", "grafana")
    }
    prometheus = mounts["prometheus"]
    assert prometheus["/etc/prometheus/prometheus.yml"] == PROMETHEUS / "prometheus.yml"
    # prometheus.yml names its rules relative to itself: they must sit side by side.
    assert prometheus["/etc/prometheus/alerts.yml"] == PROMETHEUS / "alerts.yml"
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    grafana = mounts["grafana"]
    assert grafana["/etc/grafana/provisioning"] == GRAFANA / "provisioning"
    providers = yaml_documents(GRAFANA / "provisioning" / "dashboards" / "hsearch.yml")[0]
    (provider,) = providers["providers"]
    assert grafana[provider["options"]["path"]] == GRAFANA / "dashboards"
    for source in (*prometheus.values(), *grafana.values()):
        assert source.exists(), source


def test_the_agreed_metrics_are_the_ones_the_code_records() -> None:
    # The recorded metrics, by their exposition names and labels: the dashboard and the
    # alerts are checked against METRICS and METRIC_LABELS, which must be the code's.
    suffix: dict[str | None, str] = {"counter": "_total", "histogram": "", "gauge": ""}
    recorded = {
        f"{m._name}{suffix[m._type]}": (m._type, set(m._labelnames))
        for m in vars(instruments).values()
        if isinstance(m, MetricWrapperBase)
    }
    for name, (kind, labels) in recorded.items():
        assert METRICS.get(name) == kind, name
        assert set(METRIC_LABELS[name]) == labels, name
    # The rest are read at scrape time (hsearch.metrics.exposition).
    scraped = {"hsearch_jobs", "hsearch_queue_depth", "hsearch_dependency_up", "hsearch_build_info"}
    assert set(METRICS) == set(recorded) | scraped
    source = Path(exposition.__file__).read_text()
    assert all(f'"{name}"' in source for name in scraped)


def test_workers_run_tasks_in_their_own_process_and_are_probed_there() -> None:
    """No prefork child that could die while the pod's process lives on; liveness is
    answered during a task (a solo worker answers `celery inspect ping` only between
    tasks)."""
    (container,) = containers(of_kind("Deployment")["hsearch-worker"])
    assert "--pool=solo" in container["command"]
    assert not any(arg.startswith("--concurrency") for arg in container["command"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
