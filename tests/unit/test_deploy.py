"""The shipped deployment files: deploy/haproxy/haproxy.cfg passes `haproxy -c` and keeps the
policies docs/scale-out.md promises; deploy/kubernetes/ passes the Kubernetes API schemas
(kubernetes-validate, strict) and its probes, grace period and settings fit the appliance."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from appliance.settings import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
HAPROXY_CFG = DEPLOY / "haproxy" / "haproxy.cfg"
# The oldest Kubernetes the manifests are meant for, and the newest schemas the checker ships.
KUBERNETES_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]


def manifests() -> dict[str, dict]:
    """Every document under deploy/kubernetes/, keyed by kind."""
    documents = [
        document
        for path in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]
    return {document["kind"]: document for document in documents}


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed (apt-get install haproxy)")
def test_haproxy_config_passes_haproxy_check() -> None:
    result = subprocess.run(["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=30)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output and "ALERT" not in output, output


def test_haproxy_config_keeps_its_policies() -> None:
    lines = [line.split("#")[0].strip() for line in HAPROXY_CFG.read_text().splitlines()]
    directives = [line for line in lines if line]
    assert "balance leastconn" in directives
    assert "http-check send meth GET uri /health ver HTTP/1.1 hdr Host appliance" in directives
    assert "http-check expect status 200" in directives
    # Retried only when the connection failed (the request never reached a box).
    assert [line for line in directives if line.startswith("retry-on")] == ["retry-on conn-failure"]
    assert "option redispatch 1" in directives
    # Nothing that holds back or rewrites a stream's body; the server side waits long enough.
    assert not [
        line for line in directives if line.startswith(("compression", "filter", "option http-buffer-response"))
    ]
    assert "timeout server 10m" in directives and "timeout tunnel 1h" in directives
    # A draining box is taken out without cutting its streams.
    assert not [line for line in directives if "shutdown-sessions" in line]
    default_server = next(line for line in directives if line.startswith("default-server"))
    assert re.search(r"\binter 1s\b.*\bfastinter 500ms\b.*\bfall 2\b", default_server)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_kubernetes_manifests_pass_the_api_schemas(version: str) -> None:
    found = manifests()
    assert set(found) == {"ConfigMap", "Deployment", "PersistentVolumeClaim", "PodDisruptionBudget", "Service"}
    for document in found.values():
        kubernetes_validate.validate(document, version, strict=True)


def test_kubernetes_probes_grace_period_and_settings(tmp_path: Path) -> None:
    found = manifests()
    config = tmp_path / "appliance.toml"
    config.write_text(found["ConfigMap"]["data"]["appliance.toml"])
    settings = load_settings({}, config=config, environ={})  # unknown keys would raise
    assert tomllib.loads(config.read_text())  # and it is plain TOML
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    port = container["ports"][0]
    assert port["containerPort"] == settings.port and settings.host == "0.0.0.0"
    # Liveness never fails while models load (that is /health's 503); readiness follows /health.
    assert container["startupProbe"]["httpGet"]["path"] == "/health/live"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert settings.shutdown_delay_seconds > 0
    assert pod["terminationGracePeriodSeconds"] > settings.shutdown_delay_seconds + settings.drain_seconds
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert settings.graphs.startswith(mounts["models"] + "/")
    assert settings.api_key_file.startswith(mounts["api-keys"] + "/")
    assert settings.model_cache_dir == mounts["model-cache"]
    service = found["Service"]["spec"]
    assert service["selector"] == found["Deployment"]["spec"]["selector"]["matchLabels"]
    assert service["ports"][0]["targetPort"] == port["name"]
