"""Loopback stand-ins for live APIs: the Kubernetes API server (recorded responses), Tempo and
Jaeger query APIs, and the faults a live source can have (hang, HTTP 500, a connection
dropped midway)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DATA = Path(__file__).parents[1] / "data" / "collect" / "kubernetes-api"
#: what a fault handler answers: "hang" (sleep past the client's timeout), "drop" (promise a
#: body, send half, close)
HANG_S = 3.0

Reply = tuple[int, Any]  # (status, JSON-able body | bytes | "hang" | "drop")
Route = Callable[[str, dict[str, str]], Reply]


@contextmanager
def serve(route: Route) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering GETs with ``route(path, query)``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            status, body = route(parts.path, dict(urllib.parse.parse_qsl(parts.query)))
            if body == "hang":
                time.sleep(HANG_S)
                body = {}
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            if body == "drop":
                raw = json.dumps({"kind": "List", "items": [{"x": "y" * 1000}] * 50}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw[: len(raw) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, address: None  # type: ignore[method-assign]  # faults break pipes on purpose
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


#: API paths (namespace "llm") -> recorded file; anything else under /apis is an absent CRD
KUBE_PATHS = {
    "/api/v1/namespaces/llm/pods": "pods.json",
    "/api/v1/namespaces/llm/events": "events.json",
    "/apis/apps/v1/namespaces/llm/deployments": "deployments.json",
    "/apis/apps/v1/namespaces/llm/replicasets": "replicasets.json",
    "/apis/autoscaling/v2/namespaces/llm/horizontalpodautoscalers": "hpas.json",
    "/apis/leaderworkerset.x-k8s.io/v1/namespaces/llm/leaderworkersets": "leaderworkersets.json",
}


class KubeApi:
    """Recorded list responses, paged by ``limit``/``continue`` like the API server; ``faults``
    maps a path to a fault reply; ``seen`` records every path asked."""

    def __init__(self) -> None:
        self.faults: dict[str, Reply] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []

    def __call__(self, path: str, query: dict[str, str]) -> Reply:
        self.seen.append((path, query))
        if path in self.faults:
            return self.faults[path]
        name = KUBE_PATHS.get(path)
        if name is None:
            return 404, json.loads((DATA / "status_404.json").read_text())
        doc = json.loads((DATA / name).read_text())
        offset = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(doc["items"]) or 1)
        items = doc["items"]
        doc["items"] = items[offset : offset + limit]
        more = offset + limit < len(items)
        doc["metadata"] = dict(
            doc.get("metadata") or {}, **({"continue": str(offset + limit)} if more else {})
        )
        if not more:
            doc["metadata"].pop("continue", None)
        return 200, doc


def kubeconfig(path: Path, server: str, token: str = "kube-s3cr3t-token") -> Path:
    """A kubeconfig whose one context points at ``server`` with a bearer token."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server}\n"
        "contexts:\n- name: test\n  context:\n    cluster: fake\n    user: u\n    namespace: llm\n"
        f"users:\n- name: u\n  user:\n    token: {token}\n"
    )
    return path
