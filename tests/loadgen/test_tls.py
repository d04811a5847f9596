"""https: the client speaks TLS on its own read path (kernel stamps kept), checks certificates
and hostnames unless told not to, and sends SNI.  Certificates are made here, self-signed."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from pathlib import Path

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tailtriage.errors import ConfigError
from tailtriage.loadgen import LoadConfig, run_load

from .servers import fast_server, serve_sim_process


def _self_signed(tmp: Path, names: list[str], ips: tuple[str, ...] = ()) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = dt.datetime.now(dt.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _server_ctx(cert: Path, key: Path, sni_seen: list[str | None]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ctx.sni_callback = lambda _sock, name, _ctx: sni_seen.append(name)
    return ctx


def _cfg(url: str, **kw: object) -> LoadConfig:
    base: dict[str, object] = dict(
        url=url, model="m", concurrency=4, requests=12, output_len="8", input_len="4", drain=5.0
    )
    base.update(kw)
    return LoadConfig(**base)  # type: ignore[arg-type]


def test_https_with_a_trusted_ca_bundle_matches_the_server_send_times(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, ["localhost"])
    sni: list[str | None] = []
    log = tmp_path / "send.jsonl"
    with fast_server(ttft=0.03, itl=0.01, tls=_server_ctx(cert, key, sni), send_log=log) as port:
        res = run_load(_cfg(f"https://localhost:{port}", ca_bundle=cert))
    assert [r.status for r in res.records] == ["ok"] * 12, res.records[0].error_detail
    assert all(r.output_tokens == 8 and len(r.chunks) == 8 for r in res.records)
    assert sni and set(sni) == {"localhost"}  # SNI was sent
    # keep-alive over TLS: 4 users, 4 connections, 12 requests
    assert res.summary.self_checks["connections_opened"] == 4
    # TLS records are stamped like plain reads: each chunk's arrival is after its send and
    # close to it (loose bound: the test machine is shared)
    srv = {d["request_id"]: d for d in map(orjson.loads, log.read_bytes().splitlines())}
    errs = [
        t - sent
        for r in res.records
        for (t, _), sent in zip(r.chunks, srv[r.request_id]["sends"], strict=True)
    ]
    assert min(errs) > -0.0005
    assert sorted(errs)[len(errs) // 2] < 0.005


def test_https_self_signed_needs_insecure(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, ["localhost"])
    with fast_server(tls=_server_ctx(cert, key, [])) as port:
        refused = run_load(_cfg(f"https://localhost:{port}", requests=2, concurrency=1))
        allowed = run_load(
            _cfg(f"https://localhost:{port}", requests=2, concurrency=1, insecure=True)
        )
    assert {r.error for r in refused.records} == {"connect"}
    assert all("CERTIFICATE_VERIFY_FAILED" in (r.error_detail or "") for r in refused.records)
    assert [r.status for r in allowed.records] == ["ok", "ok"]


def test_https_hostname_must_match_the_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, ["localhost"])  # no IP address in the certificate
    with fast_server(tls=_server_ctx(cert, key, [])) as port:
        res = run_load(_cfg(f"https://127.0.0.1:{port}", requests=2, concurrency=1, ca_bundle=cert))
    assert {r.error for r in res.records} == {"connect"}
    assert all("127.0.0.1" in (r.error_detail or "") for r in res.records)


def test_https_against_serve_sim_over_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, ["localhost"], ("127.0.0.1",))
    with serve_sim_process("--engine", "fast", "--ttft-ms", "20", "--itl-ms", "5",
                           "--tls-cert", str(cert), "--tls-key", str(key)) as port:  # fmt: skip
        res = run_load(_cfg(f"https://127.0.0.1:{port}", ca_bundle=cert, stream=False))
        streamed = run_load(_cfg(f"https://127.0.0.1:{port}", ca_bundle=cert))
    assert [r.status for r in res.records] == ["ok"] * 12
    assert [r.status for r in streamed.records] == ["ok"] * 12
    assert all(r.output_tokens == 8 for r in res.records + streamed.records)


def test_missing_ca_bundle_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no-such\.pem"):
        _cfg("https://localhost:1", ca_bundle=tmp_path / "no-such.pem")
