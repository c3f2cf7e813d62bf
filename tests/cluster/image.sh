#!/bin/bash
# The container test image (issue 27, docs/containers.md): Debian bookworm (debootstrap
# minbase) with python3, the pinned CPU torch and the bundled trainer's needs (PyYAML,
# pydantic; jobkit mounts its own packages), as a Charliecloud directory image and a Podman
# image. Built once into a fixed place and reused: a second run with the same torch
# pin prints "reused" and returns at once. Needs root, debootstrap, podman and the host's pip
# for Python 3.11 (the image's Python is Debian's 3.11: pip --target fills its dist-packages).
#
#   tests/cluster/image.sh            # builds or reuses; prints the image paths
#   JOBKIT_IMAGES=/elsewhere tests/cluster/image.sh
set -euo pipefail
repo=$(cd -- "$(dirname -- "$0")/../.." && pwd)
images=${JOBKIT_IMAGES:-/var/lib/jobkit-cluster/images}
rootfs=$images/torch
podman_name=localhost/jobkit-torch:test
mirror=${JOBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
pip=${JOBKIT_IMAGE_PIP:-}
packages="torch numpy pyyaml pydantic"
pin="$packages: $(grep -iE '^(torch|numpy|pyyaml|pydantic|pydantic-core)==' "$repo/.ci/constraints.txt" | sort | tr '\n' ' ')"
stamp=$rootfs/.jobkit-image

if [[ -f "$stamp" && "$(cat "$stamp")" == "$pin" ]] &&
    podman --runtime runc image exists "$podman_name" 2>/dev/null; then
  echo "image.sh: reused $rootfs and $podman_name ($pin)"
  exit 0
fi
mkdir -p -- "$images"
exec 9>"$images/.lock"
flock 9
# The runtimes and debootstrap, from Debian's packages (dpkg's lock awaited: up.sh may be
# installing beside this script).
if ! command -v debootstrap >/dev/null || ! command -v podman >/dev/null ||
    ! command -v ch-run >/dev/null; then
  apt_options=(-o DPkg::Lock::Timeout=600 -y -qq)
  # apt's lists lock has no timeout option: tried again while another apt-get holds it.
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    apt-get update -qq -o DPkg::Lock::Timeout=600 && break
    (( attempt < 10 )) || exit 1
    sleep 10
  done
  DEBIAN_FRONTEND=noninteractive apt-get install "${apt_options[@]}" charliecloud podman debootstrap >/dev/null
fi
if [[ -z "$pip" ]]; then
  # The image's Python is Debian bookworm's 3.11: pip --target needs the same minor version.
  if [[ "$(python3 -c 'import sys; print(sys.version_info[:2] == (3, 11))')" != True ]]; then
    echo "image.sh: python3 is not 3.11 (the image's): set JOBKIT_IMAGE_PIP to a 3.11 pip" >&2
    exit 1
  fi
  # A pip of its own (Debian's python3 refuses pip installs outside a virtualenv).
  [[ -x "$images/.pip/bin/pip" ]] || python3 -m venv "$images/.pip"
  pip="$images/.pip/bin/python -m pip"
fi
start=$SECONDS
building=$rootfs.building
rm -rf -- "$building"
if [[ -x "$rootfs/usr/bin/python3" && -f "$rootfs/.jobkit-base" ]]; then
  # The Debian part is there: only the Python packages change (a new pin).
  mv -- "$rootfs" "$building"
  rm -rf -- "$building/usr/local/lib/python3.11/dist-packages"
else
  debootstrap --variant=minbase --include=python3 bookworm "$building" "$mirror" \
    >"$images/debootstrap.log" 2>&1 || { tail -n 20 "$images/debootstrap.log" >&2; exit 1; }
  touch "$building/.jobkit-base"
fi
# shellcheck disable=SC2086  # $pip is a command and its words
$pip install --quiet --no-warn-script-location --target "$building/usr/local/lib/python3.11/dist-packages" \
  -c "$repo/.ci/constraints.txt" $packages 2>&1 | grep -v 'is ignored' || true
# torchrun on PATH, as in every torch image (pip --target leaves its scripts in dist-packages/bin).
printf '#!/bin/sh\nexec python3 -m torch.distributed.run "$@"\n' >"$building/usr/local/bin/torchrun"
chmod 755 "$building/usr/local/bin/torchrun"
# ch-run binds the host's /etc/hosts and /etc/resolv.conf onto these files when the image has
# them (ch-run(1), "Files bind-mounted"): without them the node names (n1, n2) do not resolve.
touch "$building/etc/hosts" "$building/etc/resolv.conf"
chroot "$building" python3 -c 'import torch, yaml, pydantic; print("image.sh: torch", torch.__version__)'
rm -rf -- "$rootfs"
mv -- "$building" "$rootfs"
echo "$pin" >"$stamp"
# Podman's copy of the same tree (podman import: no layers, no config).
podman --runtime runc rmi -f "$podman_name" >/dev/null 2>&1 || true
tar -C "$rootfs" --exclude=./.jobkit-image --exclude=./.jobkit-base -c . | podman --runtime runc import - "$podman_name" >/dev/null
echo "image.sh: built $rootfs and $podman_name in $(( SECONDS - start )) s ($pin)"
