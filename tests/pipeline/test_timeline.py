"""The analyze report carries Kubernetes events and scaling/queue series for the timeline chart."""

from __future__ import annotations

import pyarrow as pa

from builders import make_capture, make_events, make_series
from tailtriage.pipeline.analyze import timeline
from tailtriage.store import DuckDBStore


def test_timeline_sums_pods_per_scrape_and_keeps_events_in_time_order() -> None:
    series = pa.concat_tables(
        [
            make_series("vllm:num_requests_waiting", [(10.0, 3.0), (25.0, 7.0)], pod="a"),
            make_series("vllm_num_requests_waiting", [(10.0, 1.0), (25.0, 2.0)], pod="b"),
            make_series("kube_horizontalpodautoscaler_status_current_replicas", [(10.0, 2.0)]),
            make_series("vllm:num_requests_running", [(10.0, 4.0)], pod="a"),
            make_series("unrelated_metric", [(10.0, 99.0)]),
        ]
    )
    events = make_events([(30.0, "pod_ready"), (12.0, "hpa_rescale", {"replicas": 3})])
    with DuckDBStore(make_capture(series=series, events=events)) as store:
        evs, ser = timeline(store)
    assert [e[:2] for e in evs] == [(12.0, "hpa_rescale"), (30.0, "pod_ready")]
    assert ser["queue_depth"] == ((10.0, 4.0), (25.0, 9.0))
    assert ser["hpa_replicas"] == ((10.0, 2.0),)
    assert ser["running_batch"] == ((10.0, 4.0),)
    assert "unrelated_metric" not in ser and "hpa_desired_replicas" not in ser
