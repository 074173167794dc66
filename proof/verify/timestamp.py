"""Check 9, timestamp (`TimestampError`): the RFC 3161 tokens over the envelopes' signatures.

A pack whose manifest.json says `time_source: rfc3161` holds signatures/engine.tsr (and, once the
DPO has attested, signatures/dpo.tsr): each a TimeStampResp (RFC 3161 2.4.2) from a timestamp
authority. With the TSA root(s) the caller pins (`--tsa-root PEM`, never from the pack), each token:

 a  has status granted (0) or grantedWithMods (1), and a SignedData (RFC 5652) whose eContentType is
    id-ct-TSTInfo, in DER this module reads itself (`der`);
 b  carries a messageImprint that is SHA-256 of the bytes of the signature of ITS envelope (the
    engine's token over the engine's signature, the DPO's over the DPO's): a token over another
    digest, or swapped between the two, is refused;
 c  names its signer certificate (sid and the ESS signingCertificate(V2) attribute agree with one
    certificate in the token), whose signedAttrs hold contentType id-ct-TSTInfo and messageDigest =
    hash(eContent), and whose signature (ECDSA or RSA PKCS#1 v1.5) over the DER SET of signedAttrs
    verifies with that certificate's key (`cryptography`);
 d  the signer certificate has the extendedKeyUsage timeStamping, critical and alone (RFC 3161 2.3),
    and chains, through CA certificates in the token, to a pinned root: each link's signature
    verifies, each issuer is a CA, every certificate is valid at genTime;
 e  genTime lies within the run: not before the request was received nor before the time the
    statement claims (verified_at for the engine, attested_at for the DPO) by more than
    `CLOCK_SKEW`, the DPO's not before the engine's, and none after now (+ `CLOCK_SKEW`).

Revocation (CRL/OCSP) is not checked: the verifier is offline. Without a pinned root the tokens are
NOT checked and the result says so; a pinned root with a pack that holds no token is refused (its
times are the engine's own). The same token verifies with `openssl ts -verify -in signatures/engine.tsr
-data engine.sig -CAfile tsa-root.pem` (docs/verify-with-openssl.md).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import ExtendedKeyUsageOID

from proof.verify import der
from proof.verify.errors import KeyArgumentError, TimestampError, checking, fail
from proof.verify.strict_json import utc_time
from wire.format import (
    DPO_ENVELOPE,
    DPO_TSR,
    ENGINE_ENVELOPE,
    ENGINE_TSR,
    TIME_SOURCE_ENGINE,
    TIME_SOURCE_RFC3161,
)

CLOCK_SKEW = dt.timedelta(minutes=5)
"""How far the engine's (or the DPO's) clock may be from the TSA's."""
MAX_CHAIN = 6
"""Certificates from the signer to the pinned root, at most."""
MAX_ROOTS_BYTES = 256 * 1024

SHA256, SHA384, SHA512 = "2.16.840.1.101.3.4.2.1", "2.16.840.1.101.3.4.2.2", "2.16.840.1.101.3.4.2.3"
_HASHES: dict[str, tuple[str, type[hashes.HashAlgorithm]]] = {
    SHA256: ("sha256", hashes.SHA256),
    SHA384: ("sha384", hashes.SHA384),
    SHA512: ("sha512", hashes.SHA512),
}
SIGNED_DATA = "1.2.840.113549.1.7.2"
TST_INFO = "1.2.840.113549.1.9.16.1.4"
ATTR_CONTENT_TYPE = "1.2.840.113549.1.9.3"
ATTR_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
ATTR_SIGNING_CERT = "1.2.840.113549.1.9.16.2.12"
ATTR_SIGNING_CERT_V2 = "1.2.840.113549.1.9.16.2.47"
_ECDSA = {"1.2.840.10045.4.3.2": SHA256, "1.2.840.10045.4.3.3": SHA384, "1.2.840.10045.4.3.4": SHA512}
_RSA = {"1.2.840.113549.1.1.11": SHA256, "1.2.840.113549.1.1.12": SHA384, "1.2.840.113549.1.1.13": SHA512}
EC_PUBLIC_KEY, RSA_ENCRYPTION = "1.2.840.10045.2.1", "1.2.840.113549.1.1.1"
TIMESTAMP_FILES = {"engine": ENGINE_TSR, "dpo": DPO_TSR}


# --- reading a token -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    """What the checks need of one TimeStampResp."""

    status: int
    imprint_alg: str
    imprint: bytes
    gen_time: dt.datetime
    serial: int
    policy: str
    nonce: int | None
    e_content: bytes
    digest_alg: str
    signed_attrs: bytes
    """The signedAttrs as the signature covers them: the DER SET (tag 0x31, not the [0] of SignerInfo)."""
    attrs: dict[str, list[der.Node]]
    sig_alg: str
    signature: bytes
    sid_issuer_serial: tuple[bytes, int] | None
    sid_key_id: bytes | None
    certs: tuple[bytes, ...]


def _alg(node: der.Node, what: str) -> str:
    parts = node.expect(der.SEQUENCE, what).children()
    if not parts or len(parts) > 2:
        raise der.DerError(f"{what}: not an AlgorithmIdentifier")
    if len(parts) == 2 and (parts[1].tag != der.NULL or parts[1].value):
        raise der.DerError(f"{what}: parameters other than NULL (no algorithm used here takes any)")
    return der.oid(parts[0], what)


def _tst_info(e_content: bytes) -> tuple[str, bytes, dt.datetime, int, str, int | None]:
    """(imprint algorithm, imprint, genTime, serialNumber, policy, nonce) of a TSTInfo (RFC 3161 2.4.2)."""
    parts = der.parse(e_content).expect(der.SEQUENCE, "TSTInfo").children()
    if len(parts) < 5 or der.integer(parts[0], "TSTInfo version") != 1:
        raise der.DerError("TSTInfo: not version 1")
    policy = der.oid(parts[1], "TSTInfo policy")
    imprint = parts[2].expect(der.SEQUENCE, "messageImprint").children()
    if len(imprint) != 2:
        raise der.DerError("messageImprint: not (hashAlgorithm, hashedMessage)")
    alg = _alg(imprint[0], "messageImprint hashAlgorithm")
    hashed = imprint[1].expect(der.OCTET_STRING, "hashedMessage").value
    serial = der.integer(parts[3], "TSTInfo serialNumber")
    gen = der.generalized_time(parts[4], "TSTInfo genTime")
    nonce = next((der.integer(p, "TSTInfo nonce") for p in parts[5:] if p.tag == der.INTEGER), None)
    return alg, hashed, gen, serial, policy, nonce


def _signer_info(node: der.Node) -> dict[str, Any]:
    parts = node.expect(der.SEQUENCE, "SignerInfo").children()
    if len(parts) < 5:
        raise der.DerError("SignerInfo: too few fields")
    out: dict[str, Any] = {"issuer_serial": None, "key_id": None}
    sid = parts[1]
    if der.integer(parts[0], "SignerInfo version") != (1 if sid.tag == der.SEQUENCE else 3):
        raise der.DerError("SignerInfo: its version does not match its signer identifier (RFC 5652 5.3)")
    if sid.tag == der.SEQUENCE:
        issuer, serial = sid.children()
        out["issuer_serial"] = (issuer.expect(der.SEQUENCE, "sid issuer").raw, der.integer(serial, "sid serial"))
    elif sid.tag == 0x80:
        out["key_id"] = sid.value
    else:
        raise der.DerError("SignerInfo: an unknown signer identifier")
    out["digest_alg"] = _alg(parts[2], "SignerInfo digestAlgorithm")
    signed = parts[3]
    if signed.tag != 0xA0:
        raise der.DerError("SignerInfo: no signedAttrs (RFC 3161 requires them)")
    out["signed_attrs"] = b"\x31" + signed.raw[1:]
    attrs: dict[str, list[der.Node]] = {}
    for a in signed.children():
        kind, values = a.expect(der.SEQUENCE, "Attribute").children()
        name = der.oid(kind, "Attribute type")
        if name in attrs:
            raise der.DerError(f"signedAttrs: attribute {name} twice")
        attrs[name] = values.expect(der.SET, "Attribute values").children()
    out["attrs"] = attrs
    out["sig_alg"] = _alg(parts[4], "SignerInfo signatureAlgorithm")
    out["signature"] = parts[5].expect(der.OCTET_STRING, "SignerInfo signature").value if len(parts) > 5 else b""
    return out


def parse_response(data: bytes) -> Token:
    """A TimeStampResp (DER) read into a `Token`; `DerError` when it is not one."""
    top = der.parse(data).expect(der.SEQUENCE, "TimeStampResp").children()
    if len(top) != 2:
        raise der.DerError("TimeStampResp: no timeStampToken (the TSA refused the request)")
    status_info = top[0].expect(der.SEQUENCE, "PKIStatusInfo").children()
    status = der.integer(status_info[0], "PKIStatus")
    content = top[1].expect(der.SEQUENCE, "ContentInfo").children()
    if len(content) != 2 or der.oid(content[0], "contentType") != SIGNED_DATA:
        raise der.DerError("the token is not a CMS SignedData")
    explicit = content[1].expect(0xA0, "ContentInfo content").children()
    if len(explicit) != 1:
        raise der.DerError("ContentInfo content: not one SignedData")
    sd = explicit[0].expect(der.SEQUENCE, "SignedData").children()
    if der.integer(sd[0], "SignedData version") != 3:
        raise der.DerError("SignedData: not version 3 (RFC 5652 5.1, an eContentType other than id-data)")
    digest_algs = {_alg(a, "SignedData digestAlgorithms") for a in sd[1].expect(der.SET, "digestAlgorithms").children()}
    encap = sd[2].expect(der.SEQUENCE, "encapContentInfo").children()
    if len(encap) != 2 or der.oid(encap[0], "eContentType") != TST_INFO:
        raise der.DerError("the SignedData does not hold a TSTInfo")
    e_content = der.parse(encap[1].expect(0xA0, "eContent").value).expect(der.OCTET_STRING, "eContent").value
    certs: tuple[bytes, ...] = ()
    rest = sd[3:]
    if rest and rest[0].tag == 0xA0:
        certs = tuple(c.expect(der.SEQUENCE, "a certificate of the token").raw for c in rest[0].children())
        rest = rest[1:]
    if rest and rest[0].tag == 0xA1:
        rest = rest[1:]
    if len(rest) != 1:
        raise der.DerError("SignedData: no signerInfos")
    signers = rest[0].expect(der.SET, "signerInfos").children()
    if len(signers) != 1:
        raise der.DerError(f"SignedData: {len(signers)} signers (a timestamp token has exactly one)")
    si = _signer_info(signers[0])
    if si["digest_alg"] not in digest_algs or not digest_algs <= set(_HASHES):
        raise der.DerError("SignedData: digestAlgorithms do not list exactly known hashes, the signer's among them")
    alg, imprint, gen, serial, policy, nonce = _tst_info(e_content)
    return Token(
        status=status,
        imprint_alg=alg,
        imprint=imprint,
        gen_time=gen,
        serial=serial,
        policy=policy,
        nonce=nonce,
        e_content=e_content,
        digest_alg=si["digest_alg"],
        signed_attrs=si["signed_attrs"],
        attrs=si["attrs"],
        sig_alg=si["sig_alg"],
        signature=si["signature"],
        sid_issuer_serial=si["issuer_serial"],
        sid_key_id=si["key_id"],
        certs=certs,
    )


# --- checking a token ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    """A token that passed a-d: when the TSA saw the signature, and who the TSA is."""

    gen_time: dt.datetime
    serial: int
    tsa: str

    def iso(self) -> str:
        """genTime as YYYY-MM-DDTHH:MM:SS[.ffffff]Z."""
        return self.gen_time.strftime("%Y-%m-%dT%H:%M:%S" + (".%f" if self.gen_time.microsecond else "") + "Z")


def load_roots(pem: bytes) -> list[x509.Certificate]:
    """The pinned TSA root certificates (one or more PEM CERTIFICATE blocks); `KeyArgumentError` else."""
    if len(pem) > MAX_ROOTS_BYTES:
        fail(KeyArgumentError, f"the TSA root file is larger than {MAX_ROOTS_BYTES} bytes")
    try:
        roots = x509.load_pem_x509_certificates(pem)
    except ValueError:
        fail(KeyArgumentError, "the TSA root is not a PEM certificate")
    if not roots:
        fail(KeyArgumentError, "the TSA root file holds no certificate")
    return roots


def _hash(alg: str, data: bytes, what: str) -> bytes:
    if alg not in _HASHES:
        fail(TimestampError, f"{what}: hash algorithm {alg} is not SHA-256, SHA-384 or SHA-512")
    return hashlib.new(_HASHES[alg][0], data).digest()


def _signer(token: Token, certs: Sequence[x509.Certificate], name: str) -> x509.Certificate:
    for cert in certs:
        if token.sid_issuer_serial is not None:
            issuer, serial = token.sid_issuer_serial
            if cert.issuer.public_bytes() == issuer and cert.serial_number == serial:
                return cert
        elif token.sid_key_id is not None:
            try:
                ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
            except x509.ExtensionNotFound:
                continue
            if ski == token.sid_key_id:
                return cert
    fail(TimestampError, f"{name}: the token does not carry its signer's certificate (request it with certReq)")


def _ess_names(token: Token, cert: x509.Certificate, name: str) -> None:
    """The ESS signingCertificate(V2) attribute (RFC 2634 / RFC 5035) names `cert`: its first
    certHash is the hash of the certificate's DER."""
    cert_der = cert.public_bytes(serialization.Encoding.DER)
    if ATTR_SIGNING_CERT_V2 in token.attrs:
        ids = token.attrs[ATTR_SIGNING_CERT_V2][0].expect(der.SEQUENCE, "SigningCertificateV2").children()
        first = ids[0].expect(der.SEQUENCE, "certs").children()[0].expect(der.SEQUENCE, "ESSCertIDv2").children()
        alg = _alg(first[0], "ESSCertIDv2 hashAlgorithm") if first[0].tag == der.SEQUENCE else SHA256
        cert_hash = (first[1] if first[0].tag == der.SEQUENCE else first[0]).expect(der.OCTET_STRING, "certHash").value
        ok = _hash(alg, cert_der, name) == cert_hash
    elif ATTR_SIGNING_CERT in token.attrs:
        ids = token.attrs[ATTR_SIGNING_CERT][0].expect(der.SEQUENCE, "SigningCertificate").children()
        first = ids[0].expect(der.SEQUENCE, "certs").children()[0].expect(der.SEQUENCE, "ESSCertID").children()
        ok = (
            hashlib.sha1(cert_der, usedforsecurity=False).digest()
            == first[0].expect(der.OCTET_STRING, "certHash").value
        )
    else:
        fail(TimestampError, f"{name}: the token has no signingCertificate attribute (RFC 3161 2.4.1)")
    if not ok:
        fail(TimestampError, f"{name}: the signingCertificate attribute names another certificate than the signer's")


def _cms_signature(token: Token, cert: x509.Certificate, name: str) -> None:
    """c: contentType, messageDigest and the signature over the DER SET of signedAttrs."""
    ctype = token.attrs.get(ATTR_CONTENT_TYPE)
    if not ctype or len(ctype) != 1 or der.oid(ctype[0], "contentType") != TST_INFO:
        fail(TimestampError, f"{name}: the signed contentType is not id-ct-TSTInfo")
    digest = token.attrs.get(ATTR_MESSAGE_DIGEST)
    if not digest or len(digest) != 1:
        fail(TimestampError, f"{name}: the token has no signed messageDigest")
    if digest[0].expect(der.OCTET_STRING, "messageDigest").value != _hash(token.digest_alg, token.e_content, name):
        fail(TimestampError, f"{name}: the signed messageDigest is not the digest of the TSTInfo (TSTInfo altered)")
    key = cert.public_key()
    try:
        if isinstance(key, ec.EllipticCurvePublicKey) and token.sig_alg in (*_ECDSA, EC_PUBLIC_KEY):
            alg = _ECDSA.get(token.sig_alg, token.digest_alg)
            key.verify(token.signature, token.signed_attrs, ec.ECDSA(_HASHES[alg][1]()))
        elif isinstance(key, rsa.RSAPublicKey) and token.sig_alg in (*_RSA, RSA_ENCRYPTION):
            alg = _RSA.get(token.sig_alg, token.digest_alg)
            key.verify(token.signature, token.signed_attrs, padding.PKCS1v15(), _HASHES[alg][1]())
        else:
            fail(TimestampError, f"{name}: signature algorithm {token.sig_alg} is not ECDSA or RSA PKCS#1 v1.5")
    except (InvalidSignature, KeyError):
        fail(TimestampError, f"{name}: the TSA's signature over the token does not verify")


def _readable(cert: x509.Certificate) -> x509.Certificate:
    """`cert`, once every part is read (`cryptography` parses lazily): a certificate with a malformed
    name, extension or key is refused even when the chain does not need it, as `openssl ts -verify`
    refuses the whole token then (found by tests/proof/test_trusted_time_properties.py)."""
    for n in (cert.subject, cert.issuer):
        n.rfc4514_string()
        for attr in n:
            _ = attr.value
    for ext in cert.extensions:
        _ = ext.value
    cert.public_key()
    return cert


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _valid_at(cert: x509.Certificate, when: dt.datetime) -> bool:
    return cert.not_valid_before_utc <= when <= cert.not_valid_after_utc


def _timestamping_eku(cert: x509.Certificate, name: str) -> None:
    try:
        ext = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        fail(TimestampError, f"{name}: the signer's certificate has no extendedKeyUsage timeStamping")
    if list(ext.value) != [ExtendedKeyUsageOID.TIME_STAMPING] or not ext.critical:
        fail(
            TimestampError,
            f"{name}: the signer's certificate is not a TSA's (extendedKeyUsage must be timeStamping alone, critical)",
        )


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    if cert.issuer != issuer.subject:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _chain(
    signer: x509.Certificate,
    pool: Sequence[x509.Certificate],
    roots: Sequence[x509.Certificate],
    when: dt.datetime,
    name: str,
) -> list[x509.Certificate]:
    """d: from the signer up through CA certificates of the token to a pinned root, each valid at
    `when`; returns the certificates of the chain below the root."""
    cert, chain = signer, [signer]
    for _ in range(MAX_CHAIN):
        if not _valid_at(cert, when):
            fail(TimestampError, f"{name}: a certificate of the TSA's chain is not valid at the token's genTime")
        for root in roots:
            if cert == root or _issued_by(cert, root):
                if not _valid_at(root, when):
                    fail(TimestampError, f"{name}: the pinned TSA root is not valid at the token's genTime")
                return chain
        up = next((c for c in pool if c != cert and _is_ca(c) and _issued_by(cert, c)), None)
        if up is None:
            fail(TimestampError, f"{name}: the TSA's certificate does not chain to the pinned TSA root (unpinned TSA)")
        cert = up
        chain.append(cert)
    fail(TimestampError, f"{name}: the TSA's certificate chain is longer than {MAX_CHAIN}")


def envelope_signature(envelope: bytes) -> bytes:
    """The signature bytes of a (canonical, already checked) envelope: what its token covers."""
    return base64.b64decode(json.loads(envelope)["signatures"][0]["sig"], validate=True)


def check_token(
    data: bytes, signature: bytes, roots: Sequence[x509.Certificate], name: str, *, other: bytes | None = None
) -> Stamp:
    """Checks a-d of one token over `signature` (`other`: the other envelope's signature, named when a
    token was swapped). Returns its `Stamp`; whatever else a hostile token breaks ends as a
    `TimestampError`, never another exception."""
    with checking(TimestampError):
        return _check_token(data, signature, roots, name, other)


def _check_token(
    data: bytes, signature: bytes, roots: Sequence[x509.Certificate], name: str, other: bytes | None
) -> Stamp:
    try:
        token = parse_response(data)
    except der.DerError as exc:
        fail(TimestampError, f"{name}: not an RFC 3161 TimeStampResp in DER ({exc})")
    if token.status not in (0, 1):
        fail(TimestampError, f"{name}: the TSA did not grant the timestamp (status {token.status})")
    if token.imprint_alg != SHA256:
        fail(TimestampError, f"{name}: the token's messageImprint is not SHA-256")
    if token.imprint != hashlib.sha256(signature).digest():
        swapped = other is not None and token.imprint == hashlib.sha256(other).digest()
        fail(
            TimestampError,
            f"{name}: the token covers "
            + ("the OTHER envelope's signature (tokens swapped)" if swapped else "another digest than its signature"),
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", CryptographyDeprecationWarning)  # e.g. a serial that is not positive
            pool = [_readable(x509.load_der_x509_certificate(c)) for c in token.certs]
    except (ValueError, CryptographyDeprecationWarning):
        fail(TimestampError, f"{name}: a certificate in the token is not DER X.509 as RFC 5280 writes it")
    signer = _signer(token, pool, name)
    _ess_names(token, signer, name)
    _cms_signature(token, signer, name)
    _timestamping_eku(signer, name)
    used = {_der(c) for c in [*_chain(signer, pool, roots, token.gen_time, name), *roots]}
    if any(_der(c) not in used for c in pool):
        # nothing in a token goes unexamined: openssl parses every certificate strictly and refuses a
        # token with one it cannot read, so a certificate off the chain would be a second reading
        fail(
            TimestampError,
            f"{name}: the token carries a certificate that is neither on the TSA's chain nor the pinned root",
        )
    return Stamp(token.gen_time, token.serial, signer.subject.rfc4514_string())


# --- check 9 over a pack -------------------------------------------------------------------------


@dataclass(frozen=True)
class Timestamps:
    """What check 9 found: `source` (manifest's time_source), `state` (`verified`, `not checked`: tokens
    present but no TSA root given, or `engine clock`: the pack's times are the engine's own) and the
    verified genTimes."""

    source: str
    state: str
    engine_time: str | None = None
    dpo_time: str | None = None


def time_source(manifest: Mapping[str, Any]) -> str:
    """The manifest's time_source (engine-clock when absent); `TimestampError` for another value or a
    `timestamps` map that names other files than the wire's."""
    source = manifest.get("time_source", TIME_SOURCE_ENGINE)
    if source == TIME_SOURCE_ENGINE and "timestamps" not in manifest:
        return TIME_SOURCE_ENGINE
    if source == TIME_SOURCE_RFC3161 and manifest.get("timestamps") == TIMESTAMP_FILES:
        return TIME_SOURCE_RFC3161
    fail(TimestampError, "manifest.json declares a time source or timestamp files this verifier does not know")


def _window(stamp: Stamp, earliest: Sequence[tuple[str, dt.datetime | None]], now: dt.datetime, name: str) -> None:
    """e: genTime not before each claimed time (minus the skew) nor after now (plus the skew)."""
    for what, when in earliest:
        if when is not None and stamp.gen_time < when - CLOCK_SKEW:
            fail(TimestampError, f"{name}: the token's genTime {stamp.iso()} is before {what}: a time outside the run")
    if stamp.gen_time > now + CLOCK_SKEW:
        fail(TimestampError, f"{name}: the token's genTime {stamp.iso()} is in the future")


def check_timestamps(
    files: Mapping[str, bytes],
    manifest: Mapping[str, Any],
    roots: Sequence[x509.Certificate] | None,
    predicate: Mapping[str, Any],
    dpo_predicate: Mapping[str, Any] | None,
    *,
    now: dt.datetime | None = None,
) -> Timestamps:
    """Check 9 over a pack whose checks 1-8 passed. The DPO's token is checked only with the DPO's
    envelope checked (`dpo_predicate`)."""
    source = time_source(manifest)
    if source == TIME_SOURCE_ENGINE:
        if roots is not None:
            fail(
                TimestampError,
                "a TSA root was given, but the pack holds no timestamp token: its times are the engine's own",
            )
        return Timestamps(source, "engine clock")
    if roots is None:
        return Timestamps(source, "not checked")
    now = now or dt.datetime.now(dt.UTC)
    engine_sig = envelope_signature(files[ENGINE_ENVELOPE])
    dpo_sig = envelope_signature(files[DPO_ENVELOPE]) if DPO_ENVELOPE in files else None
    received = utc_time(predicate.get("received_at"))
    engine = check_token(files[ENGINE_TSR], engine_sig, roots, ENGINE_TSR, other=dpo_sig)
    _window(
        engine,
        [("the request was received", received), ("the verification it signs", utc_time(predicate.get("verified_at")))],
        now,
        ENGINE_TSR,
    )
    dpo_time = None
    if dpo_predicate is not None and dpo_sig is not None:
        dpo = check_token(files[DPO_TSR], dpo_sig, roots, DPO_TSR, other=engine_sig)
        _window(
            dpo,
            [
                ("the engine's token", engine.gen_time + CLOCK_SKEW),
                ("the attestation time the DPO signs", utc_time(dpo_predicate.get("attested_at"))),
            ],
            now,
            DPO_TSR,
        )
        dpo_time = dpo.iso()
    return Timestamps(source, "verified", engine.iso(), dpo_time)
