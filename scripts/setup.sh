#!/usr/bin/env bash
# Installs the Debian packages hetrain needs to build, test and run its demo, if missing: the
# build's (cmake ... libdnnl-dev), the demo's data, and the tools the tests use beyond a minimal
# Debian (xmllint, ip/tc, pgrep); make test-fresh proves the list complete on an empty root.
# Usage: scripts/setup.sh [EXTRA...]  (as root, or with sudo available); EXTRA: what one make
#        target needs beside these: package names (valgrind for make test-valgrind, mpich
#        libmpich-dev for make test-mpich), fuzz (clang and its libFuzzer runtime, make fuzz),
#        smpi (SimGrid's libsimgrid-dev: smpicc and smpirun, make smpi / make test-smpi), or
#        slurm (Slurm's controller, node daemon and commands, and munge: make test-slurm,
#        which starts daemons of its own; the system's services, if any start, stay unused)
set -euo pipefail
pkgs=(cmake make gcc pkg-config libopenblas-dev zlib1g-dev libopenmpi-dev openmpi-bin
      libdnnl-dev dataset-fashion-mnist libxml2-dev libxml2-utils iproute2 procps protobuf-c-compiler libprotobuf-c-dev libonnx-dev)
for extra in "$@"; do
  case "$extra" in
    fuzz) pkgs+=(clang libclang-rt-dev) ;;
    smpi) pkgs+=(libsimgrid-dev) ;; # SimGrid 3.32: smpicc, smpirun (make smpi, make test-smpi)
    slurm) pkgs+=(slurmctld slurmd slurm-client munge) ;;
    *) pkgs+=("$extra") ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
