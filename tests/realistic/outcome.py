"""What one run of the stack produced: a frozen record per request, pod, event and sample,
everything the writers and the truth need (stage times along a request's path are contiguous,
so they sum to its TTFT by construction)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from realistic.spec import Spec
from realistic.workload import Requests

#: the first byte's way back from the engine to the client-facing gateway (s)
RETURN_S = 0.0008


@dataclass(frozen=True)
class Event:
    time: float
    reason: str
    type: str  # Normal | Warning
    kind: str  # involved object kind
    name: str
    message: str
    component: str
    count: int = 1
    last: float = -1.0


@dataclass(frozen=True)
class PodRecord:
    idx: int
    name: str
    rs: str
    node: str
    ip: str
    created: float
    scheduled: float
    pulled: float
    started: float
    ready: float
    killed: float
    unschedulable_until: float


@dataclass(frozen=True)
class Outcome:
    spec: Spec
    req: Requests
    # per request, seconds from the window start (nan where not reached)
    gw_in: np.ndarray
    rx_done: np.ndarray
    pool_in: np.ndarray
    dispatch: np.ndarray
    wait_pending: np.ndarray  # bool: the wait before dispatch was for capacity on its way
    up_tx: np.ndarray
    retries: np.ndarray
    new_conn: np.ndarray
    pod_in: np.ndarray
    qp_done: np.ndarray
    api_start: np.ndarray
    llm_start: np.ndarray
    queued: np.ndarray
    scheduled: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    preempted: np.ndarray
    pod: np.ndarray
    status: np.ndarray  # HTTP status at the edge
    pods: tuple[PodRecord, ...]
    events: tuple[Event, ...]
    # 1 s samples: columns of SAMPLE_COLUMNS, one row per (tick, pod)
    samples: np.ndarray
    # autoscaler per tick: time, desired, current (pods in the Deployment), ready, metric value
    hpa: np.ndarray
    kv_capacity: int

    @property
    def edge_first(self) -> np.ndarray:
        return self.first + RETURN_S

    @property
    def edge_end(self) -> np.ndarray:
        return self.finish + RETURN_S


SAMPLE_COLUMNS = (
    "t",
    "pod",
    "running",
    "waiting",
    "kv_usage",
    "preemptions",
    "busy_s",
    "compute_s",
    "memory_s",
    "comm_s",
    "tokens",
    "cpu_s",
    "inflight",
    "decode_tokens",
)
