"""Write single-layer OCI image-layout tarballs from local files (stdlib only).

An image is a list of rootfs entries plus an image config. The layer is a deterministic tar (sorted,
root-owned unless a base folder says otherwise, fixed mtime), gzip-compressed; the result is the OCI
image layout (`oci-layout`, `index.json`, `blobs/sha256/...`) packed in one tar that
`ctr -n k8s.io images import` loads. The index entry carries `io.containerd.image.name`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

FIXED_MTIME = 0
GZIP_LEVEL = 1  # the tarball never leaves this machine: favour speed
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class Entry:
    """One path in the image's rootfs: a file (from `src` or `data`), a folder or a symlink."""

    path: str
    src: Path | None = None
    data: bytes | None = None
    mode: int = 0o644
    symlink: str | None = None
    is_dir: bool = False


@dataclass(frozen=True)
class ImageConfig:
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/local/bin:/usr/bin:/bin"])
    workdir: str = "/"
    user: str = ""

    def as_json(self) -> dict:
        cfg = {"Env": self.env, "WorkingDir": self.workdir}
        if self.entrypoint:
            cfg["Entrypoint"] = self.entrypoint
        if self.cmd:
            cfg["Cmd"] = self.cmd
        if self.user:
            cfg["User"] = self.user
        return cfg


class _HashingWriter(io.RawIOBase):
    """Forwards writes to `sink` while hashing them and counting bytes."""

    def __init__(self, sink) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.sha.update(b)
        self.size += len(b)
        self.sink.write(b)
        return len(b)


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _add_entries(tar: tarfile.TarFile, entries: list[Entry]) -> None:
    by_path: dict[str, Entry] = {}
    for e in entries:
        for parent in _parents(e.path):
            by_path.setdefault(parent, Entry(parent, is_dir=True, mode=0o755))
        by_path[e.path.strip("/")] = e
    for path in sorted(by_path):
        e = by_path[path]
        info = tarfile.TarInfo(path)
        info.mtime = FIXED_MTIME
        info.mode = e.mode
        if e.is_dir:
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        elif e.symlink is not None:
            info.type = tarfile.SYMTYPE
            info.linkname = e.symlink
            info.mode = 0o777
            tar.addfile(info)
        elif e.data is not None:
            info.size = len(e.data)
            tar.addfile(info, io.BytesIO(e.data))
        else:
            assert e.src is not None, path
            info.size = e.src.stat().st_size
            with open(e.src, "rb") as f:
                tar.addfile(info, f)


SKIP_IN_BASE = ("dev/", "proc/", "sys/", "run/")


def _add_tree(tar: tarfile.TarFile, root: Path) -> None:
    """Add a rootfs folder (owners and modes as on disk, mtimes fixed); /dev, /proc, /sys, /run stay empty."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) + sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if any(rel.startswith(p) for p in SKIP_IN_BASE):
                continue
            st = os.lstat(full)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue  # device nodes, sockets, fifos: the runtime provides its own
            info = tar.gettarinfo(full, rel)
            info.mtime = FIXED_MTIME
            info.uname = info.gname = ""
            if info.isreg():
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:  # folders, symlinks, hard links to a file added earlier
                tar.addfile(info)


def write_layer(dest, entries: list[Entry], base: Path | None) -> tuple[str, str, int]:
    """Write the gzip layer to file object `dest`; return (diff_id, digest, compressed size)."""
    compressed = _HashingWriter(dest)
    with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as gz:
        raw = _HashingWriter(gz)
        with tarfile.open(fileobj=raw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            if base is not None:
                _add_tree(tar, base)
            _add_entries(tar, entries)
    return "sha256:" + raw.sha.hexdigest(), "sha256:" + compressed.sha.hexdigest(), compressed.size


def _blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size, info.mtime, info.mode = len(data), FIXED_MTIME, 0o644
    tar.addfile(info, io.BytesIO(data))
    return "sha256:" + digest, len(data)


def write_image(out: Path, ref: str, entries: list[Entry], config: ImageConfig, base: Path | None = None) -> str:
    """Write the OCI layout tarball for `ref` to `out` (atomically); return the manifest digest."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out.parent) as layer:
        diff_id, layer_digest, layer_size = write_layer(layer, entries, base)
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "config": config.as_json(),
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "gateway-sizer k8s/images/build_images.py"}],
        }
        tmp = out.with_name(out.name + ".tmp")
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            config_digest, config_size = _blob(tar, json.dumps(image_config, sort_keys=True).encode())
            manifest = {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": config_size},
                "layers": [{"mediaType": MEDIA_LAYER, "digest": layer_digest, "size": layer_size}],
            }
            manifest_digest, manifest_size = _blob(tar, json.dumps(manifest, sort_keys=True).encode())
            info = tarfile.TarInfo(f"blobs/sha256/{layer_digest.split(':')[1]}")
            info.size, info.mtime, info.mode = layer_size, FIXED_MTIME, 0o644
            layer.seek(0)
            tar.addfile(info, layer)
            index = {
                "schemaVersion": 2,
                "mediaType": MEDIA_INDEX,
                "manifests": [
                    {
                        "mediaType": MEDIA_MANIFEST,
                        "digest": manifest_digest,
                        "size": manifest_size,
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1],
                        },
                    }
                ],
            }
            for name, data in (
                ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                ("index.json", json.dumps(index, sort_keys=True).encode()),
            ):
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), FIXED_MTIME, 0o644
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    return manifest_digest
