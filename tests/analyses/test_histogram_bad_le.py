"""A bucket series whose ``le`` label is not a number is skipped and counted, not silently
dropped: the report says so, and the percentile is read from the other buckets."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from prometheus_files import VLLM_TTFT, histogram_rows, write_query_range
from tailtriage.analyses.histograms import load_histogram
from tailtriage.pipeline.analyze import analyze
from tailtriage.store import opened
from tailtriage.store.input import load_capture

T0 = 1_767_261_600.0
NAME = "vllm:time_to_first_token_seconds"


def _bundle(folder: Path, bad: bool) -> Path:
    rng = np.random.default_rng(2)
    times = [T0 + 15.0 * i for i in range(20)]
    obs = [rng.uniform(0.05, 0.5, 0 if i == 0 else 50) for i in range(20)]
    rows = histogram_rows(NAME, {"pod": "vllm-0"}, VLLM_TTFT, times, obs)
    if bad:  # a mangled copy of one bucket series, as a broken relabelling writes it
        extra = copy.deepcopy(rows[3])
        extra["metric"]["le"] = "0.1s"  # type: ignore[index]
        rows.append(extra)
    folder.mkdir(parents=True)
    write_query_range(folder / "q.json", rows)
    return folder


def test_a_bucket_with_a_bad_le_is_skipped_and_counted(tmp_path: Path) -> None:
    with opened(load_capture(_bundle(tmp_path / "bad", bad=True))) as store:
        hist = load_histogram(store, NAME)
    assert hist is not None and hist.skipped_buckets == 1
    assert all(np.isfinite(le) or le == np.inf for le in hist.les)


def test_the_report_warns_and_reads_the_percentile_from_the_other_buckets(
    tmp_path: Path,
) -> None:
    window = (T0, T0 + 15.0 * 20)
    good = analyze(
        load_capture(_bundle(tmp_path / "good", bad=False)), "p95 ttft < 1s", incident=window
    )
    bad = analyze(
        load_capture(_bundle(tmp_path / "bad", bad=True)), "p95 ttft < 1s", incident=window
    )
    assert bad.slos[0].observed == good.slos[0].observed
    warned = [w for w in bad.data_quality.warnings if "`le`" in w]
    assert len(warned) == 1 and NAME in warned[0] and "1 bucket series" in warned[0]
    assert not [w for w in good.data_quality.warnings if "`le`" in w]
