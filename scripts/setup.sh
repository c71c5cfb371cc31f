#!/usr/bin/env bash
# Installs the Debian packages hetrain needs to build, test and run its demo, if missing.
# Usage: scripts/setup.sh [fuzz]     (as root, or with sudo available; fuzz: also clang and
#                                    its libFuzzer runtime, for make fuzz)
set -euo pipefail
pkgs=(cmake make gcc pkg-config libopenblas-dev zlib1g-dev libopenmpi-dev openmpi-bin
      dataset-fashion-mnist libxml2-utils)
[ "${1:-}" = fuzz ] && pkgs+=(clang libclang-rt-dev)
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
