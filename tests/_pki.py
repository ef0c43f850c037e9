"""Test certificates for the TLS tests: a throwaway CA, a server certificate for 127.0.0.1 and
a client certificate, made by the openssl command, and a ``RawServer`` that serves TLS with them."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from _raw_server import RawServer


def make_pki(d: Path) -> dict[str, Path]:
    """The CA, server and client files in ``d``, by name; the test is skipped without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command makes the test certificates")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True, timeout=60)

    run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=fastsse test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    for name, ext in (
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        (d / f"{name}.ext").write_text("basicConstraints=CA:FALSE\nauthorityKeyIdentifier=keyid\n" + ext)
        run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip
    (d / "client-both.pem").write_bytes((d / "client.pem").read_bytes() + (d / "client.key").read_bytes())
    return {
        name: d / name
        for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "client-both.pem")
    }


def tls_server(
    pki: dict[str, Path], script: Callable[[socket.socket], None], *, client_cert: bool = True
) -> RawServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["server.pem"], pki["server.key"])
    if client_cert:  # the client must show a certificate from the CA
        context.load_verify_locations(pki["ca.pem"])
        context.verify_mode = ssl.CERT_REQUIRED
    return RawServer(script, tls=context)
