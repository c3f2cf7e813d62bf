"""The container image and its digest (jobkit/provenance/image.py), for real: Podman's test
image (tests/cluster/image.sh) and directory images as Charliecloud runs them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from jobkit.provenance.image import container_image, listing_digest
from tests.cluster import image_build

PODMAN_IMAGE = "localhost/jobkit-torch:test"


def test_podmans_digest_is_the_one_podman_reports() -> None:
    image_build.wait()  # .ci/run builds the image beside the tests
    inspect = ["podman", "image", "inspect", "--format", "{{.Digest}}", PODMAN_IMAGE]
    done = subprocess.run(inspect, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        why = f"no test image {PODMAN_IMAGE}: run tests/cluster/image.sh"
        if os.environ.get("JOBKIT_REQUIRE_CLUSTER") == "1":
            pytest.fail(why)
        pytest.skip(why)
    container = {"image": PODMAN_IMAGE, "runtime": "podman", "options": ["--runtime runc"]}
    found = container_image({"container": container}, None)
    assert found is not None and found["digest"] == done.stdout.strip()
    assert found["digest"].startswith("sha256:") and found["id"]
    missing = container_image({"container": {**container, "image": "localhost/none:x"}}, None)
    assert missing is not None and missing["digest"] is None
    assert missing["note"].startswith("podman image inspect localhost/none:x: ")


def test_a_directory_image_gets_a_listing_digest_that_follows_its_files(tmp_path: Path) -> None:
    image = tmp_path / "sub" / "img"
    (image / "usr" / "bin").mkdir(parents=True)
    (image / "usr" / "bin" / "python3").write_text("#!\n")
    (image / "lib").symlink_to("usr/lib")
    spec = {"container": {"image": "img", "runtime": "charliecloud"}}
    found = container_image(spec, str(tmp_path / "sub"))  # relative: the submit folder's
    assert found is not None and found["path"] == str(image)
    first = found["digest"]
    assert first == listing_digest(image) and first.startswith("listing-sha256:")
    (image / "usr" / "bin" / "python3").write_text("#!/changed\n")
    assert listing_digest(image) != first
    gone = container_image({"container": {"image": "/no/img", "runtime": "charliecloud"}}, None)
    assert gone is not None and gone["digest"] is None
    assert gone["note"] == "/no/img not found on this host: no digest"


def test_registry_images_and_jobs_without_a_container() -> None:
    spec = {"container": {"image": "docker://pytorch/pytorch:2.4", "runtime": "apptainer"}}
    found = container_image(spec, None)
    assert found is not None and found["digest"] is None and "registry image" in found["note"]
    assert container_image({"container": None}, None) is None and container_image({}, None) is None
