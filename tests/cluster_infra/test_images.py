"""k8s/images/build_images.py writes a valid, deterministic OCI image layout and rebuilds only on change."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import sys
import tarfile

import pytest

from support.cluster import run
from support.project import K8S


def blob(layout: tarfile.TarFile, digest: str) -> bytes:
    data = layout.extractfile("blobs/sha256/" + digest.split(":")[1]).read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest, "blob content must match its digest"
    return data


def test_pause_image_is_a_valid_oci_layout_and_is_built_once(tmp_path):
    if shutil.which("gcc") is None:
        pytest.fail("the pause image needs gcc: `make test-packages` installs it")
    env = {"GATEWAY_SIZER_CACHE": str(tmp_path)}
    builder = [sys.executable, str(K8S / "images/build_images.py"), "pause"]
    first = run(builder, timeout=120, env=env)
    assert "pause: built localhost/pause:1" in first.stderr

    with tarfile.open(tmp_path / "images/pause.tar") as layout:
        assert json.loads(layout.extractfile("oci-layout").read()) == {"imageLayoutVersion": "1.0.0"}
        [entry] = json.loads(layout.extractfile("index.json").read())["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == "localhost/pause:1"
        manifest = json.loads(blob(layout, entry["digest"]))
        config = json.loads(blob(layout, manifest["config"]["digest"]))
        assert config["config"]["Entrypoint"] == ["/pause"]
        layer = blob(layout, manifest["layers"][0]["digest"])
        raw = gzip.decompress(layer)
        assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(raw).hexdigest()]
        with tarfile.open(fileobj=io.BytesIO(raw)) as rootfs:
            pause = rootfs.getmember("pause")
            assert pause.isreg() and pause.mode == 0o755 and pause.uid == 0 and pause.mtime == 0

    digest = json.loads((tmp_path / "images/pause.json").read_text())["digest"]
    second = run(builder, timeout=120, env=env)
    assert "pause: unchanged" in second.stderr
    assert json.loads((tmp_path / "images/pause.json").read_text())["digest"] == digest

    # A stamp whose key no longer matches the inputs means a rebuild, which yields the same bytes.
    stamp = json.loads((tmp_path / "images/pause.json").read_text())
    stamp["key"] = "0" * 64
    (tmp_path / "images/pause.json").write_text(json.dumps(stamp))
    third = run(builder, timeout=120, env=env)
    assert "pause: built" in third.stderr
    assert json.loads((tmp_path / "images/pause.json").read_text())["digest"] == digest, "layers are deterministic"


def test_unknown_image_is_one_clear_line(tmp_path):
    proc = run(
        [sys.executable, str(K8S / "images/build_images.py"), "nginxx"],
        timeout=60,
        env={"GATEWAY_SIZER_CACHE": str(tmp_path)},
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: unknown image nginxx (known: pause, nginx, envoy, contour, prometheus, coredns, locust, runner)"
    )
