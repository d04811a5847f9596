"""Prometheus text exposition / OpenMetrics snapshots into the Capture's ``series`` table."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import ParseError
from tailtriage.sources import base
from tailtriage.sources.exposition import SOURCE, parse_exposition, parse_sample

OPTS = base.ReadOptions()


@pytest.fixture
def data(shared_data: Path) -> Path:
    return shared_data


def _rows(table: pa.Table) -> list[dict[str, object]]:
    return table.to_pylist()  # type: ignore[no-any-return]


def _value(table: pa.Table, metric: str, **labels: str) -> float:
    want = json.dumps(dict(sorted(labels.items())), separators=(",", ":"))
    hits = [r["value"] for r in _rows(table) if r["metric"] == metric and r["labels"] == want]
    assert len(hits) == 1, (metric, labels, hits)
    return float(hits[0])  # type: ignore[arg-type]


def _sample_lines(path: Path) -> list[str]:
    """Sample lines counted independently of the parser: non-comment, non-blank lines."""
    out = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    return out


@pytest.mark.parametrize(
    "name",
    [
        "prometheus/alltypes.237mfs.prom.txt",
        "prometheus/promtestdata.txt",
        "prometheus/1histogram.om.txt",
        "engines/sglang_metrics_sample.txt",
        "engines/vllm_metrics_sample.txt",
    ],
)
def test_every_exposition_file_is_detected_and_every_sample_read(name: str, data: Path) -> None:
    path = data / name
    assert base.detect(path) is SOURCE
    cap = SOURCE.read(path, OPTS)
    lines = _sample_lines(path)
    elided = [s for s in lines if s == "..."]
    assert cap.series.num_rows == len(lines) - len(elided)
    assert cap.metadata.quality.get("series.bad_lines", 0) == len(elided)
    assert cap.metadata.provenance[0].records == cap.series.num_rows
    # keys of every labels value are sorted JSON
    for labels in set(cap.series.column("labels").to_pylist()):
        decoded = json.loads(labels)
        assert list(decoded) == sorted(decoded)


def test_alltypes_classic_histogram_buckets_and_families(data: Path) -> None:
    cap = SOURCE.read(data / "prometheus/alltypes.237mfs.prom.txt", OPTS)
    s = cap.series
    metric = "prometheus_http_request_duration_seconds"
    h = "/api/v1/query"
    assert _value(s, f"{metric}_bucket", handler=h, le="0.1") == 3051
    assert _value(s, f"{metric}_bucket", handler=h, le="1") == 3213
    assert _value(s, f"{metric}_bucket", handler=h, le="+Inf") == 3217
    assert _value(s, f"{metric}_count", handler=h) == 3217
    assert _value(s, f"{metric}_sum", handler=h) == pytest.approx(70.23571750499987)
    buckets = [
        r for r in _rows(s) if r["metric"] == f"{metric}_bucket" and h + '"' in str(r["labels"])
    ]
    assert len(buckets) == 10  # 0.1 0.2 0.4 1 3 8 20 60 120 +Inf
    # the file declares 15 histogram families; each has _bucket, _sum and _count series
    text = (data / "prometheus/alltypes.237mfs.prom.txt").read_text()
    families = [ln.split()[2] for ln in text.splitlines() if ln.endswith(" histogram")]
    assert len(families) == 15
    names = set(s.column("metric").to_pylist())
    for fam in families:
        assert {f"{fam}_bucket", f"{fam}_sum", f"{fam}_count"} <= names


def test_promtestdata_summary_quantiles_counters_and_nan(data: Path) -> None:
    cap = SOURCE.read(data / "prometheus/promtestdata.txt", OPTS)
    s = cap.series
    assert _value(s, "go_gc_duration_seconds", quantile="0.25") == pytest.approx(7.4241e-05)
    assert _value(s, "go_gc_duration_seconds_count") == 99
    assert _value(s, "go_goroutines") == 33
    assert _value(s, "go_memstats_alloc_bytes_total") == 8.3062296e08
    q = _value(s, "prometheus_sd_marathon_refresh_duration_seconds", quantile="0.5")
    assert math.isnan(q)
    assert (
        _value(s, "prometheus_target_interval_length_seconds", interval="50ms", quantile="0.99")
        == 0.054404386000000006
    )


def test_openmetrics_le_spellings_are_normalised(data: Path) -> None:
    cap = SOURCE.read(data / "prometheus/1histogram.om.txt", OPTS)
    s = cap.series
    labels = dict(address="0.0.0.0", generation="20", port="5001")
    # written le="1.0" and le="10.0" in the file
    assert _value(s, "golang_manual_histogram_seconds_bucket", **labels, le="1") == 0
    assert _value(s, "golang_manual_histogram_seconds_bucket", **labels, le="10") == 1
    assert _value(s, "golang_manual_histogram_seconds_bucket", **labels, le="+Inf") == 1
    ports = {json.loads(x).get("port") for x in s.column("labels").to_pylist()}
    assert ports == {"5001", "5002", "5003"}


def test_sglang_histogram_with_sum_first_and_exponent_counts(data: Path) -> None:
    cap = SOURCE.read(data / "engines/sglang_metrics_sample.txt", OPTS)
    s = cap.series
    model = "meta-llama/Llama-3.1-8B-Instruct"
    ttft = "sglang:time_to_first_token_seconds"
    assert _value(s, f"{ttft}_bucket", le="+Inf", model_name=model) == 11008
    assert _value(s, f"{ttft}_bucket", le="2.5", model_name=model) == 140
    assert _value(s, f"{ttft}_sum", model_name=model) == pytest.approx(2.3518979474117756e06)
    assert _value(s, "sglang:prompt_tokens_total", model_name=model) == 8.128902e06
    assert _value(s, "sglang:token_usage", model_name=model) == 0.28


def test_vllm_sample_elisions_skipped_truncated_histogram_flagged(data: Path) -> None:
    path = data / "engines/vllm_metrics_sample.txt"
    cap = SOURCE.read(path, OPTS)
    s = cap.series
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert _value(s, "vllm:num_requests_running", model_name=model) == 8
    assert (
        _value(s, "vllm:request_success_total", finished_reason="length", model_name=model) == 131
    )
    assert _value(s, "vllm:time_to_first_token_seconds_bucket", le="0.04", model_name=model) == 97
    buckets = [r for r in _rows(s) if r["metric"] == "vllm:time_to_first_token_seconds_bucket"]
    assert len(buckets) == 8
    assert cap.metadata.quality["series.bad_lines"] == 3
    assert cap.metadata.quality["series.histogram_without_inf"] == 1
    assert any("line 4" in w for w in cap.metadata.warnings)
    assert any("+Inf" in w for w in cap.metadata.warnings)


def test_prometheus_test_scripts_are_not_taken_for_exposition(data: Path) -> None:
    for name in ("prometheus/histograms.test", "prometheus/histogram_quantile_cases.json"):
        path = data / name
        assert not SOURCE.sniff(path.read_bytes()[: base.SNIFF_BYTES], path)


def test_snapshot_time_hint_timestamps_and_mtime(tmp_path: Path) -> None:
    p = tmp_path / "snap"
    p.write_text(
        "# tailtriage-snapshot-time 2024-05-01T12:00:00Z\n"
        "# TYPE a gauge\n"
        "a 1\n"
        "b 2 1714564805000\n"  # 0.0.4: milliseconds
        "c 3 1714564806.5\n"  # OpenMetrics: seconds
    )
    cap = SOURCE.read(p, OPTS)
    times = dict(
        zip(
            cap.series.column("metric").to_pylist(),
            cap.series.column("time").to_pylist(),
            strict=True,
        )
    )
    assert times == {"a": 1714564800.0, "b": 1714564805.0, "c": 1714564806.5}
    assert not cap.metadata.warnings

    q = tmp_path / "nohint"
    q.write_text("# TYPE a gauge\na 1\n")
    os.utime(q, (1700000000, 1700000000))
    cap = SOURCE.read(q, OPTS)
    assert cap.series.column("time").to_pylist() == [1700000000.0]
    assert any("modification time" in w for w in cap.metadata.warnings)


def test_label_escapes_exemplars_and_special_values() -> None:
    s = parse_sample(
        r'x{path="C:\\dir",q="say \"hi\"",nl="a\nb",} +Inf # {trace_id="ab"} 0.5 1.7e9'
    )
    assert s.labels == {"path": "C:\\dir", "q": 'say "hi"', "nl": "a\nb"}
    assert s.value == math.inf and s.timestamp is None
    assert parse_sample('y{a="}{,"} -Inf').labels == {"a": "}{,"}
    assert math.isnan(parse_sample("z NaN").value)
    for bad in ("x{a=b} 1", "x 1 2 3", "x", 'x{a="1"}2', "x 1_000"):
        with pytest.raises(ValueError):
            parse_sample(bad)


def test_file_without_any_sample_is_a_parse_error_with_line(tmp_path: Path) -> None:
    p = tmp_path / "bad"
    p.write_text("# TYPE a gauge\nthis is not exposition\n")
    with pytest.raises(ParseError, match=r"bad:line 2"):
        SOURCE.read(p, OPTS)


_label_value = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), _label_value, max_size=4
    ),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
)
def test_written_labels_and_values_read_back(labels: dict[str, str], value: float) -> None:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    body = ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())
    text = (
        "m{"
        + body
        + "} "
        + (repr(value) if math.isfinite(value) else ("+Inf" if value > 0 else "-Inf"))
    )
    parsed = parse_exposition(text)
    assert not parsed.bad_lines
    (sample,) = parsed.samples
    assert sample.labels == labels and sample.value == value


def test_hostile_bytes_and_a_10mb_label_value(tmp_path: Path) -> None:
    p = tmp_path / "hostile"
    huge = "v" * 10_000_000
    p.write_bytes(
        b"\xef\xbb\xbf# TYPE a gauge\n"  # BOM
        + b'a{x="caf\xe9"} 1\n'  # latin-1 byte, not UTF-8
        + b'b{big="'
        + huge.encode()
        + b'"} 2\n'
        + b"c 3 \x00\n"  # NUL where a timestamp would be
    )
    assert base.detect(p) is SOURCE
    cap = SOURCE.read(p, base.ReadOptions(max_attribute_bytes=1024))
    rows = {r["metric"]: r for r in cap.series.to_pylist()}
    assert rows["a"]["value"] == 1 and json.loads(rows["a"]["labels"])["x"] == "caf\ufffd"
    assert len(json.loads(rows["b"]["labels"])["big"]) == 1024
    assert cap.metadata.quality["series.truncated_labels"] == 1
    assert "c" not in rows and cap.metadata.quality["series.bad_lines"] == 1


_line_chars = st.sampled_from([*'ab_:{}=",# \t\\n0123456789.eE+-InfNa', "\x0b", "é"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(_line_chars, max_size=40), st.from_regex(
    r'[a-z_:]{1,4}(\{([a-z]{1,3}="[^"\\\n]{0,4}",?){0,3}\})?[ \t]{1,2}[-+]?[0-9.eE]{1,6}( [0-9]{1,14})?( # .*)?',
    fullmatch=True,
)))  # fmt: skip
def test_fast_path_agrees_with_the_explaining_parser(line: str) -> None:
    from tailtriage.sources.exposition import _fast_sample, _slow_sample

    try:
        fast = _fast_sample(line)
    except ValueError:
        fast = None
    try:
        slow = _slow_sample(line)
    except ValueError:
        slow = None
    if fast is not None:
        assert slow is not None, line
        assert (fast.name, fast.labels, fast.timestamp) == (slow.name, slow.labels, slow.timestamp)
        assert fast.value == slow.value or (math.isnan(fast.value) and math.isnan(slow.value))


def test_appended_scrapes_behind_hints_read_as_a_time_series(tmp_path: Path) -> None:
    """``while sleep 5; do echo "# tailtriage-snapshot-time $(date +%s)"; curl .../metrics;
    done >> scrapes.txt`` gives a time series without a Prometheus."""
    scrape = (
        '# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{pod="a"} {n}\n# EOF\n'
    )
    text = "".join(
        f"# tailtriage-snapshot-time {1714564800 + 5 * i}\n" + scrape.replace("{n}", str(i * i))
        for i in range(4)
    )
    p = tmp_path / "scrapes.txt"
    p.write_text(text)
    assert base.detect(p) is SOURCE
    cap = SOURCE.read(p, OPTS)
    got = [(r["time"], r["value"]) for r in cap.series.to_pylist()]
    assert got == [(1714564800.0 + 5 * i, float(i * i)) for i in range(4)]
    assert not cap.metadata.warnings
