"""The layouts a GPU budget allows and where each one's traffic runs.

A layout is ``replicas`` data-parallel copies of one engine of ``tp x pp`` GPUs (and, for a
mixture-of-experts model, the expert-parallel variant where the experts are spread over the
engine's GPUs instead of every matrix being split).  GPUs fill nodes in order: a TP group
inside one node talks over the node's link (NVLink, or PCIe where there is none); a TP group
larger than a node, or a pipeline boundary that falls between nodes, uses the fabric."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.errors import ConfigError
from tailtriage.simulator.steptime import GpuSpec, Interconnect, ModelShape, link


@dataclass(frozen=True, slots=True)
class Cluster:
    gpus: int
    nodes: int
    intra: Interconnect  # link between GPUs of one node
    inter: Interconnect  # link between nodes

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.nodes < 1 or self.gpus % self.nodes:
            raise ConfigError(f"--gpus {self.gpus} must be a positive multiple of --nodes "
                              f"{self.nodes}")  # fmt: skip
        link(self.intra), link(self.inter)  # unknown names raise ConfigError

    @property
    def per_node(self) -> int:
        return self.gpus // self.nodes


def default_cluster(gpu: GpuSpec, gpus: int, nodes: int, interconnect: str | None) -> Cluster:
    """``--interconnect`` names the fabric between nodes; on one node it names the GPUs' link.
    Inside a node GPUs use NVLink when they have it, else PCIe."""
    own: Interconnect = "nvlink" if gpu.has_nvlink else "pcie"
    name = interconnect or (own if nodes == 1 else "ib")
    chosen = link(name)
    if nodes == 1:
        if chosen.cross_node:
            raise ConfigError(f"--interconnect {chosen.name} joins nodes; with one node use "
                              "nvlink or pcie, or set --nodes")  # fmt: skip
        return Cluster(gpus, 1, chosen.name, chosen.name)
    return Cluster(gpus, nodes, own, chosen.name)


@dataclass(frozen=True, slots=True)
class Layout:
    tp: int
    pp: int
    replicas: int
    expert_parallel: bool = False  # MoE: experts spread over the engine's GPUs (DP attention)

    @property
    def engine_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def label(self) -> str:
        parts = [f"EP{self.tp}" if self.expert_parallel else f"TP{self.tp}"]
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        text = "×".join(parts)
        return f"{self.replicas} × {text}" if self.replicas > 1 else text


@dataclass(frozen=True, slots=True)
class Placement:
    """Which link each kind of traffic of one engine crosses."""

    tp_link: Interconnect
    pp_links: tuple[Interconnect, ...]
    tp_crosses_nodes: bool
    pp_cross_node_boundaries: int


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_layouts(shape: ModelShape, cluster: Cluster) -> list[Layout]:
    """Every (tp, pp, replicas) that uses all GPUs and that an engine can run: TP must divide
    the attention heads, PP must leave each stage at least one layer, and an engine larger
    than a node must fill whole nodes."""
    out: list[Layout] = []
    for tp in _divisors(cluster.gpus):
        if shape.heads % tp:
            continue
        for pp in _divisors(cluster.gpus // tp):
            if pp > shape.layers:
                continue
            engine = tp * pp
            if engine > cluster.per_node and engine % cluster.per_node:
                continue
            if engine < cluster.per_node and cluster.per_node % engine:
                continue
            replicas = cluster.gpus // engine
            out.append(Layout(tp, pp, replicas))
            if shape.is_moe and tp > 1 and pp == 1:
                out.append(Layout(tp, pp, replicas, expert_parallel=True))
    return out


def place(layout: Layout, cluster: Cluster) -> Placement:
    """GPUs fill nodes in order; stage ``i`` holds GPUs ``[i tp, (i+1) tp)`` of the engine."""
    per_node = cluster.per_node
    tp_crosses = layout.tp > per_node
    tp_link = cluster.inter if tp_crosses else cluster.intra
    links: list[Interconnect] = []
    crossing = 0
    for i in range(1, layout.pp):
        boundary = i * layout.tp  # first GPU of stage i
        crosses = tp_crosses or boundary % per_node == 0
        crossing += crosses
        links.append(cluster.inter if crosses else cluster.intra)
    return Placement(tp_link, tuple(links), tp_crosses, crossing)
