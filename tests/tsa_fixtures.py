"""A real RFC 3161 timestamp authority for the tests: OpenSSL's own (`openssl ts -reply`) behind a
small HTTP server on 127.0.0.1 that speaks `application/timestamp-query` -> `application/timestamp-reply`.

`TestTsa.start(dir)` makes a CA root and a TSA certificate issued by it (extendedKeyUsage critical
timeStamping, as RFC 3161 2.3 requires), an openssl.cnf with a [tsa] section, and serves. Two TSAs
made this way have different roots: a token of one is "from an unpinned TSA" for the other.

Also the oracle of the timestamp tests: `openssl_ts_verify`, `openssl ts -verify` on a response
file, written apart from the verifier's own DER reader.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

OPENSSL = "/usr/bin/openssl"

_CNF = """\
[ tsa ]
default_tsa = tsa_config1

[ tsa_config1 ]
dir = {dir}
serial = $dir/tsaserial
crypto_device = builtin
signer_cert = $dir/tsa.crt
certs = $dir/chain.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.3.6.1.4.1.99999.1
other_policies = 1.3.6.1.4.1.99999.2
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test TSA")]
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_tsa_certs(
    directory: Path, label: str, *, rsa_key: bool = False, eku: bool = True, intermediate: bool = False
) -> tuple[Path, Path, Path, Path]:
    """A CA root, optionally an intermediate CA, and a TSA certificate with its key, written as PEM
    into `directory`: (root.crt, tsa.crt, tsa.key, chain.pem: the CAs below the root). `eku=False`
    makes a TSA certificate WITHOUT the timeStamping extended key usage (a certificate no TSA may use)."""
    now = dt.datetime.now(dt.UTC)
    root_key = ec.generate_private_key(ec.SECP256R1())
    root = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label} root"))
        .issuer_name(_name(f"{label} root"))
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    issuer, issuer_key = root, root_key
    chain = b""
    if intermediate:
        mid_key = ec.generate_private_key(ec.SECP256R1())
        mid = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{label} intermediate"))
            .issuer_name(root.subject)
            .public_key(mid_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(root_key, hashes.SHA256())
        )
        issuer, issuer_key, chain = mid, mid_key, _pem(mid)
    tsa_key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if rsa_key
        else ec.generate_private_key(ec.SECP256R1())
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label} TSA"))
        .issuer_name(issuer.subject)
        .public_key(tsa_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, True, False, False, False, False, False, False, False), critical=True)
    )
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
    tsa = builder.sign(issuer_key, hashes.SHA256())
    paths = (directory / "root.crt", directory / "tsa.crt", directory / "tsa.key", directory / "chain.pem")
    paths[0].write_bytes(_pem(root))
    paths[1].write_bytes(_pem(tsa))
    paths[2].write_bytes(
        tsa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    paths[3].write_bytes(chain or _pem(root))
    return paths


@dataclass
class TestTsa:
    """A running TSA: `url` to POST queries to, `root` (the CA root PEM to pin), `requests` served."""

    __test__ = False  # not a test class
    directory: Path
    url: str
    root: Path
    server: ThreadingHTTPServer
    thread: threading.Thread
    requests: int = 0

    @classmethod
    def start(cls, directory: Path, label: str = "local", **cert_options: bool) -> TestTsa:
        """Make the certificates and the config in `directory` and serve on a free port of 127.0.0.1."""
        directory.mkdir(parents=True, exist_ok=True)
        root, _, _, _ = make_tsa_certs(directory, label, **cert_options)
        (directory / "tsaserial").write_text("01\n")
        cnf = directory / "openssl.cnf"
        cnf.write_text(_CNF.format(dir=directory))
        lock = threading.Lock()
        holder: list[TestTsa] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.headers.get("Content-Type") != "application/timestamp-query":
                    self.send_error(415, "expected application/timestamp-query")
                    return
                query = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock, tempfile.TemporaryDirectory(dir=directory) as tmp:
                    q, r = Path(tmp) / "q.tsq", Path(tmp) / "r.tsr"
                    q.write_bytes(query)
                    done = subprocess.run(
                        [OPENSSL, "ts", "-reply", "-config", str(cnf), "-queryfile", str(q), "-out", str(r)],
                        capture_output=True,
                        timeout=30,
                    )
                    reply = r.read_bytes() if r.exists() else b""
                    holder[0].requests += 1
                if done.returncode != 0 or not reply:
                    self.send_error(500, "openssl ts -reply failed")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        tsa = cls(directory, f"http://127.0.0.1:{server.server_address[1]}/tsa", root, server, thread)
        holder.append(tsa)
        return tsa

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def reply_for(self, data: bytes, out: Path) -> bytes:
        """A response over sha256(`data`) made directly with `openssl ts -query` + `-reply` (no HTTP)."""
        q = out.with_suffix(".tsq")
        subprocess.run(
            [OPENSSL, "ts", "-query", "-sha256", "-digest", hashlib.sha256(data).hexdigest(), "-cert", "-out", str(q)],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                OPENSSL,
                "ts",
                "-reply",
                "-config",
                str(self.directory / "openssl.cnf"),
                "-queryfile",
                str(q),
                "-out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        return out.read_bytes()


def openssl_ts_verify(response: bytes, data: bytes, root: Path, work: Path) -> bool:
    """The oracle: does `openssl ts -verify` accept `response` as a token over sha256(`data`) chaining
    to `root`? (Untrusted intermediates come from the token's own certificates.)"""
    work.mkdir(parents=True, exist_ok=True)
    resp = work / "oracle.tsr"
    resp.write_bytes(response)
    done = subprocess.run(
        [
            OPENSSL,
            "ts",
            "-verify",
            "-in",
            str(resp),
            "-digest",
            hashlib.sha256(data).hexdigest(),
            "-CAfile",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode == 0 and "Verification: OK" in done.stdout
