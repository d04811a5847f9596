"""Concrete config to copy for each action: Kubernetes YAML (HPA ``autoscaling/v2``, KEDA
``ScaledObject``, Deployment strategy, Istio ``DestinationRule``) and vLLM engine flags.

Text templates, not YAML objects: the output is meant to be read and pasted by a person, so
comments and key order matter more than round-tripping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Target:
    """Names of the deployment the config applies to (read from the capture's events)."""

    deployment: str = "vllm"
    namespace: str = "default"
    min_replicas: int = 1
    max_replicas: int = 10


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def hpa_v2(t: Target, metric: str, target: float, min_replicas: int | None = None) -> str:
    """HPA on a per-pod engine metric (served to the HPA by prometheus-adapter)."""
    # prometheus-adapter exposes `vllm:num_requests_waiting` as `vllm_num_requests_waiting`
    name = metric.replace(":", "_")
    return f"""apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {t.deployment}
  namespace: {t.namespace}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {t.deployment}
  minReplicas: {min_replicas if min_replicas is not None else t.min_replicas}
  maxReplicas: {t.max_replicas}
  metrics:
    - type: Pods
      pods:
        metric:
          name: {name}        # {metric} via prometheus-adapter
        target:
          type: AverageValue
          averageValue: "{_num(target)}"
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies:
        - type: Percent
          value: 100
          periodSeconds: 15
"""


def keda_scaled_object(
    t: Target, metric: str, target: float, min_replicas: int | None = None
) -> str:
    """The same policy as a KEDA ScaledObject (vLLM production-stack's documented path)."""
    return f"""---
# or, with KEDA instead of prometheus-adapter:
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {t.deployment}
  namespace: {t.namespace}
spec:
  scaleTargetRef:
    name: {t.deployment}
  minReplicaCount: {min_replicas if min_replicas is not None else t.min_replicas}
  maxReplicaCount: {t.max_replicas}
  pollingInterval: 5
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus.monitoring.svc:9090
        query: sum({metric}{{namespace="{t.namespace}"}})
        threshold: "{_num(target)}"
        activationThreshold: "1"
"""


def hpa_behavior(t: Target, sync_s: float, pods: int) -> str:
    return f"""apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {t.deployment}
  namespace: {t.namespace}
spec:
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      selectPolicy: Max
      policies:
        - type: Pods
          value: {pods}
          periodSeconds: {_num(sync_s)}
        - type: Percent
          value: 100
          periodSeconds: {_num(sync_s)}
"""


def engine_flags(params: Mapping[str, Any]) -> str:
    """vLLM server arguments for the ``engine.*``, ``model.*`` and ``gpu.*`` overrides."""
    flags = []
    for key, value in params.items():
        flag = _FLAGS.get(key)
        if flag is None:
            continue
        if isinstance(value, bool):
            if key == "engine.chunked_prefill":
                flags.append(f"--{'enable' if value else 'no-enable'}-chunked-prefill")
            elif key == "engine.prefix_caching":
                flags.append(f"--{'enable' if value else 'no-enable'}-prefix-caching")
            continue
        flags.append(f"--{flag} {_num(value)}")
    if not flags:
        return ""
    return "# vllm serve <model> ...\n" + " \\\n  ".join(flags) + "\n"


_FLAGS: Mapping[str, str] = {
    "engine.max_num_batched_tokens": "max-num-batched-tokens",
    "engine.max_num_seqs": "max-num-seqs",
    "engine.chunked_prefill": "enable-chunked-prefill",
    "engine.prefix_caching": "enable-prefix-caching",
    "engine.gpu_memory_utilization": "gpu-memory-utilization",
    "model.dtype": "quantization",
    "model.kv_dtype": "kv-cache-dtype",
    "gpu.tp": "tensor-parallel-size",
    "gpu.pp": "pipeline-parallel-size",
    "api_server.workers": "api-server-count",
}


def deployment_replicas(t: Target, replicas: int) -> str:
    return f"""# only because compute saturation is proven (GPUs busy, throughput flat, queue growing)
kubectl -n {t.namespace} patch hpa {t.deployment} --type merge \\
  -p '{{"spec":{{"minReplicas":{replicas},"maxReplicas":{max(replicas, t.max_replicas)}}}}}'
"""


def min_replicas(t: Target, n: int) -> str:
    return f"""kubectl -n {t.namespace} patch hpa {t.deployment} --type merge \\
  -p '{{"spec":{{"minReplicas":{n}}}}}'
"""


def prewarm(t: Target, params: Mapping[str, Any]) -> str:
    lines = [
        "# keep the image and the weights on the node so a new pod only loads from local disk",
        "apiVersion: apps/v1",
        "kind: Deployment",
        f"metadata: {{name: {t.deployment}, namespace: {t.namespace}}}",
        "spec:",
        "  template:",
        "    spec:",
        "      containers:",
        f"        - name: {t.deployment}",
        "          imagePullPolicy: IfNotPresent",
        "          volumeMounts: [{name: model-cache, mountPath: /root/.cache/huggingface}]",
        "      volumes:",
        "        - name: model-cache",
        "          persistentVolumeClaim: {claimName: model-cache}   # pre-populated, ReadOnlyMany",
    ]
    if params.get("pods.node_image_cached"):
        lines += [
            "# nodes that join (cluster autoscaler, Karpenter) must boot with the image: bake it",
            "# into the node image, or use a secondary boot disk / image-streaming snapshot; a",
            "# pre-pull DaemonSet covers only the nodes that exist",
        ]
    if "pods.load_gb_s" in params:
        lines.append(
            f"# weight loading at ~{_num(params['pods.load_gb_s'])} GB/s: local NVMe or "
            "--load-format runai_streamer / safetensors from a warm page cache"
        )
    return "\n".join(lines) + "\n"


def destination_rule(t: Target, params: Mapping[str, Any]) -> str:
    host = f"{t.deployment}.{t.namespace}.svc.cluster.local"
    lines = [
        "apiVersion: networking.istio.io/v1",
        "kind: DestinationRule",
        f"metadata: {{name: {t.deployment}, namespace: {t.namespace}}}",
        "spec:",
        f"  host: {host}",
        "  trafficPolicy:",
    ]
    routing = params.get("gateway.routing")
    if routing is not None:
        simple = {
            "least_outstanding": "LEAST_REQUEST",
            "least_request": "LEAST_REQUEST",
            "round_robin": "ROUND_ROBIN",
            "random": "RANDOM",
        }.get(str(routing))
        if simple:
            lines += ["    loadBalancer:", f"      simple: {simple}"]
        else:
            lines += [
                "    # prefix/KV-cache aware routing needs an endpoint picker: Gateway API",
                "    # Inference Extension InferencePool (llm-d / GIE EPP) or the Dynamo KV router",
            ]
    pool: list[str] = []
    if "gateway.concurrency_limit" in params:
        limit = int(params["gateway.concurrency_limit"])
        pool += [
            "      http:",
            f"        http2MaxRequests: {limit}     # in-flight requests per replica x replicas",
            "        maxRequestsPerConnection: 0",
        ]
    if "ingress.keepalive_reuse" in params:
        pool += [
            "      tcp:",
            "        tcpKeepalive: {time: 300s, interval: 75s}",
            "      http:" if "gateway.concurrency_limit" not in params else "",
            "        idleTimeout: 3600s   # reuse TLS connections instead of new handshakes",
        ]
    if pool:
        lines += ["    connectionPool:", *[p for p in pool if p]]
    return "\n".join(lines) + "\n"


def rollout_strategy(t: Target, max_surge: int, max_unavailable: int) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {t.deployment}, namespace: {t.namespace}}}
spec:
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: {max_surge}
      maxUnavailable: {max_unavailable}
  minReadySeconds: 30
  template:
    spec:
      containers:
        - name: {t.deployment}
          startupProbe:        # keep traffic away until the model is loaded and warmed up
            httpGet: {{path: /health, port: 8000}}
            periodSeconds: 5
            failureThreshold: 120
          readinessProbe:
            httpGet: {{path: /health, port: 8000}}
            periodSeconds: 5
"""


def warmup_readiness(t: Target, model: str) -> str:
    """A readiness probe that passes only once the engine answers a real completion, so the
    first user requests do not pay for CUDA graph capture or compile of unseen shapes."""
    body = '{"model": "' + model + '", "prompt": "warm-up", "max_tokens": 8}'
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {t.deployment}, namespace: {t.namespace}}}
spec:
  minReadySeconds: 30   # a new pod serves a while before the rollout retires the next old one
  template:
    spec:
      containers:
        - name: {t.deployment}
          readinessProbe:   # Ready only after a warm-up completion succeeds
            exec:
              command: ["sh", "-c", "curl -sf -m 60 localhost:8000/v1/completions -H 'Content-Type: application/json' -d '{body}'"]
            periodSeconds: 10
            timeoutSeconds: 65
            failureThreshold: 60
"""
