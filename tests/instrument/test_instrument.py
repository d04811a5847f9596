"""What `tailtriage instrument` writes, checked by the real tools: `promtool check config` and
`promtool check rules` (Debian package prometheus) and kubernetes-validate's schemas of the
Kubernetes API for every core object (HPA autoscaling/v2, Deployments, ConfigMaps)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support import installed_binary
from tailtriage.analyses.slo import parse_slos
from tailtriage.errors import ConfigError
from tailtriage.instrument import files
from tailtriage.instrument.render import InstrumentOptions, render_all, with_defaults, write_all
from tailtriage.instrument.rules import bucket_for

try:
    import kubernetes_validate
except ImportError:  # pragma: no cover - the dev extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("kubernetes-validate is not installed: pip install -e '.[dev]'",
                allow_module_level=True)  # fmt: skip
STACKS = list(itertools.product(files.GATEWAYS, files.ENGINES))
#: Kubernetes API version the objects are validated against
K8S_VERSION = "1.30"


def promtool() -> str:
    return installed_binary("promtool", "prometheus")


def written(tmp_path: Path, gateway: str, engine: str, exporter: str = "file") -> Path:
    opts = with_defaults(InstrumentOptions(gateway=gateway, engine=engine, namespace="llm",
                                           exporter=exporter))  # fmt: skip
    write_all(render_all(opts), tmp_path)
    return tmp_path


@pytest.mark.parametrize(("gateway", "engine"), STACKS)
def test_promtool_accepts_config_and_rules(tmp_path: Path, gateway: str, engine: str) -> None:
    out = written(tmp_path, gateway, engine)
    tool = promtool()
    for args in (["check", "config", files.PROMETHEUS],
                 ["check", "rules", files.RECORDING_RULES, files.ALERT_RULES]):  # fmt: skip
        done = subprocess.run([tool, *args], cwd=out, capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout + done.stderr


@pytest.mark.parametrize(("gateway", "engine"), STACKS)
def test_kubernetes_objects_match_the_api_schema(tmp_path: Path, gateway: str, engine: str) -> None:
    out = written(tmp_path, gateway, engine)
    checked = []
    for path in sorted(out.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or "apiVersion" not in doc:
                continue
            group = doc["apiVersion"].split("/")[0]
            if "." in group and not group.endswith(".k8s.io"):
                continue  # custom resources (KEDA, Istio): not in the Kubernetes API schema
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            checked.append(doc["kind"])
    assert {"HorizontalPodAutoscaler", "Deployment"} <= set(checked), checked
    if gateway == "knative":
        assert checked.count("ConfigMap") == 2


def test_schema_check_catches_a_wrong_field(tmp_path: Path) -> None:
    hpa = yaml.safe_load((written(tmp_path, "istio", "vllm") / files.HPA).read_text())
    hpa["spec"]["maxReplica"] = hpa["spec"].pop("maxReplicas")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)


@pytest.mark.parametrize("exporter", files.EXPORTERS)
def test_collector_pipeline_uses_what_it_defines(tmp_path: Path, exporter: str) -> None:
    conf = yaml.safe_load((written(tmp_path, "envoy", "vllm", exporter) / files.COLLECTOR)
                          .read_text())  # fmt: skip
    pipe = conf["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        assert set(pipe[kind]) <= set(conf[kind]), (kind, pipe[kind], list(conf[kind]))
    policies = {p["type"]: p for p in conf["processors"]["tail_sampling"]["policies"]}
    # TTFT above the SLO's threshold (the default SLOs: p95 ttft < 500ms) keeps the trace
    (condition,) = policies["ottl_condition"]["ottl_condition"]["span"]
    assert condition == 'attributes["gen_ai.latency.time_to_first_token"] > 0.5'
    assert policies["latency"]["latency"]["threshold_ms"] > 500
    assert policies["status_code"]["status_code"]["status_codes"] == ["ERROR"]
    assert 0 < policies["probabilistic"]["probabilistic"]["sampling_percentage"] < 100
    if exporter == "clickhouse":
        assert conf["exporters"]["clickhouse"]["traces_table_name"] == "otel_traces"


def test_engine_flags_and_env() -> None:
    text = {f.name: f.text for f in render_all(InstrumentOptions(engine="vllm"))}
    vllm = yaml.safe_load(text["engine-vllm.yaml"])
    container = vllm["spec"]["template"]["spec"]["containers"][0]
    assert "--collect-detailed-traces=all" in container["args"]
    assert any(a.startswith("--otlp-traces-endpoint=") for a in container["args"])
    assert "OTEL_SERVICE_NAME" in {e["name"] for e in container["env"]}
    sglang = render_all(InstrumentOptions(engine="sglang"))[2].text
    assert "--enable-trace" in sglang and "--otlp-traces-endpoint=" in sglang
    dynamo = render_all(InstrumentOptions(engine="dynamo"))[2].text
    assert "OTEL_EXPORT_ENABLED" in dynamo and "DYN_LOGGING_JSONL" in dynamo


def test_every_file_says_why() -> None:
    for f in render_all(with_defaults(InstrumentOptions(gateway="nginx", engine="sglang"))):
        assert f.text.lstrip().startswith("#"), f.name
        assert "why" in f.text.lower(), f.name


def test_slo_threshold_between_buckets_is_counted_stricter() -> None:
    bound, note = bucket_for(0.3, (0.1, 0.25, 0.5))
    assert bound == 0.25 and "stricter" in note
    assert bucket_for(0.5, (0.1, 0.25, 0.5)) == (0.5, "")


def test_alert_rules_cover_each_slo() -> None:
    opts = InstrumentOptions(slos=parse_slos("p99 ttft < 1s, p95 itl < 50ms"))
    alerts = yaml.safe_load(render_all(opts)[5].text)
    names = {r.get("alert") for g in alerts["groups"] for r in g["rules"]} - {None}
    assert names == {f"TailtriageSLOBurn_{m}_{s}" for m in ("ttft_p99", "itl_p95")
                     for s in ("page", "ticket")}  # fmt: skip
    exprs = " ".join(r["expr"] for g in alerts["groups"] for r in g["rules"])
    assert "14.4 * 0.01" in exprs and "6.0 * 0.05" in exprs  # budgets 1 - 0.99, 1 - 0.95


def test_bad_choice_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--gateway 'traefik'"):
        InstrumentOptions(gateway="traefik")


def test_cli_writes_the_files(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "tailtriage", "instrument", "--gateway", "knative", "--engine",
           "dynamo", "--exporter", "tempo", "--out", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {files.COLLECTOR, "gateway-knative.yaml", "engine-dynamo.yaml",
                     files.PROMETHEUS, files.RECORDING_RULES, files.ALERT_RULES, files.HPA,
                     files.KEDA}  # fmt: skip
