"""A real kube-apiserver and etcd for tests, the way envtest runs them for Go operators.

kube-apiserver v1.34 is built once from the Go module proxy (k8s/cluster/build.sh, cached outside the
repository); etcd comes from Debian's etcd-server. No controllers or kubelet run: tests that need a
rollout to finish set the workload's status themselves, as a controller would (and say so in their name).
"""

from __future__ import annotations

import datetime
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from runner.paths import PROJECT_ROOT
from runner.platforms.local.processes import Supervisor, free_port, wait_until

BUILD = PROJECT_ROOT / "k8s" / "cluster" / "build.sh"
ETCD = "/usr/bin/etcd"
START_TIMEOUT_S = 90.0


def built(item: str) -> Path:
    """Path of a cached build (building it first on a cold cache: kube-apiserver takes ~6 min on 2 cores)."""
    out = subprocess.run([str(BUILD), "--print-path", item], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"k8s/cluster/build.sh {item} failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool, sans=(), client: bool = False):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    if not ca:
        usage = x509.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class ApiServer:
    """A running kube-apiserver: its URL and an admin kubeconfig."""

    url: str
    kubeconfig: Path
    ca: Path
    supervisor: Supervisor

    def stop(self) -> None:
        self.supervisor.stop_all()


def start_apiserver(workdir: Path) -> ApiServer:
    """etcd + kube-apiserver on free loopback ports, RBAC on, certificates made here."""
    import ipaddress

    apiserver = built("kube-apiserver")
    workdir.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gateway-sizer-test-ca")])
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (workdir / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, workdir / "ca.key")
    serving_key = _key()
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    serving = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key,
        ca_name,
        ca_key,
        ca=False,
        sans=sans,
    )
    (workdir / "serving.crt").write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_key(serving_key, workdir / "serving.key")
    admin_key = _key()
    admin_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "test-admin"),
        ]
    )
    admin = _cert(admin_name, admin_key, ca_name, ca_key, ca=False, client=True)
    (workdir / "admin.crt").write_bytes(admin.public_bytes(serialization.Encoding.PEM))
    _write_key(admin_key, workdir / "admin.key")
    sa_key = _key()
    _write_key(sa_key, workdir / "sa.key")
    (workdir / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    supervisor = Supervisor(workdir / "logs")
    etcd_client, etcd_peer, secure = free_port(), free_port(), free_port()
    etcd = supervisor.start(
        "etcd",
        [
            ETCD,
            "--data-dir",
            str(workdir / "etcd"),
            "--name",
            "test",
            "--listen-client-urls",
            f"http://127.0.0.1:{etcd_client}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{etcd_client}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster",
            f"test=http://127.0.0.1:{etcd_peer}",
        ],
    )
    try:
        wait_until(lambda: _ok(f"http://127.0.0.1:{etcd_client}/health"), what="etcd", timeout_s=30, process=etcd)
        process = supervisor.start(
            "kube-apiserver",
            [
                str(apiserver),
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                "--bind-address=127.0.0.1",
                f"--secure-port={secure}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--client-ca-file={workdir / 'ca.crt'}",
                f"--tls-cert-file={workdir / 'serving.crt'}",
                f"--tls-private-key-file={workdir / 'serving.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={workdir / 'sa.pub'}",
                f"--service-account-signing-key-file={workdir / 'sa.key'}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
            ],
        )
        url = f"https://127.0.0.1:{secure}"
        cert = (str(workdir / "admin.crt"), str(workdir / "admin.key"))
        wait_until(
            lambda: _ok(f"{url}/readyz", cert=cert, verify=str(workdir / "ca.crt")),
            what="kube-apiserver",
            timeout_s=START_TIMEOUT_S,
            process=process,
        )
    except BaseException:
        supervisor.stop_all()
        raise
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [
                    {"name": "test", "cluster": {"server": url, "certificate-authority": str(workdir / "ca.crt")}}
                ],
                "users": [{"name": "admin", "user": {"client-certificate": cert[0], "client-key": cert[1]}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            }
        )
    )
    os.chmod(kubeconfig, 0o600)
    return ApiServer(url, kubeconfig, workdir / "ca.crt", supervisor)


def _ok(url: str, **kwargs: object) -> bool:
    try:
        return requests.get(url, timeout=2, **kwargs).ok
    except requests.RequestException:
        return False
