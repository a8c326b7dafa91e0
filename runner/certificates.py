"""Self-signed certificates for the TLS traffic profiles, made per run with `cryptography`.

The key type sets what a full TLS handshake costs the gateway (an RSA-2048 signature is some thirty times
an ECDSA P-256 one), so it is part of the profile. Certificates live two days: long enough for any run.
"""

from __future__ import annotations

import contextlib
import datetime
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from runner.files import write_atomic
from runner.profiles import TlsKey

VALID_FOR = datetime.timedelta(days=2)
RSA_BITS = 2048
RSA_EXPONENT = 65537


@dataclass(frozen=True)
class CertificateFiles:
    """A certificate and its private key as PEM files."""

    certificate: Path
    private_key: Path


def _private_key(key_type: TlsKey) -> rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey:
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=RSA_EXPONENT, key_size=RSA_BITS)


def rsa_signature_us(signs: int = 300) -> float:
    """What one signature with an RSA_BITS key (PKCS#1 v1.5, SHA-256) costs this machine's CPU, in microseconds: the
    median of `signs`, by OpenSSL. A full handshake with an rsa-2048 profile's certificate makes the gateway sign
    once (Envoy's BoringSSL signs at about OpenSSL's speed), so this is the floor of what a handshake costs it."""
    key = rsa.generate_private_key(public_exponent=RSA_EXPONENT, key_size=RSA_BITS)
    times = []
    for _ in range(signs):
        started = time.perf_counter()
        key.sign(b"handshake", padding.PKCS1v15(), hashes.SHA256())
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def pem_pair(host: str, key_type: TlsKey) -> tuple[bytes, bytes]:
    """A self-signed certificate for `host` (subject and DNS SAN) and its key, both PEM."""
    key = _private_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def certificate_files(folder: Path, key_type: TlsKey) -> CertificateFiles:
    """Where `write_certificate` puts a certificate with this key type: `<key type>.crt` and `.key`."""
    return CertificateFiles(folder / f"{key_type}.crt", folder / f"{key_type}.key")


def write_certificate(folder: Path, host: str, key_type: TlsKey) -> CertificateFiles:
    """A new certificate for `host` in `folder` (`<key type>.crt` and `.key`, the key readable by its owner only)."""
    folder.mkdir(parents=True, exist_ok=True)
    certificate, key = pem_pair(host, key_type)
    files = certificate_files(folder, key_type)
    write_atomic(files.certificate, certificate)
    write_atomic(files.private_key, key)
    files.private_key.chmod(0o600)
    return files


def remove_certificates(folder: Path) -> None:
    """Delete what `write_certificate` wrote in `folder` (those file names only), then the folder if it is empty."""
    for key_type in get_args(TlsKey):
        files = certificate_files(folder, key_type)
        files.certificate.unlink(missing_ok=True)
        files.private_key.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()
