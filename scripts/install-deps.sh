#!/usr/bin/env bash
# Installs what Chorus needs to build and test, from Debian packages only. Runs
# `apt-get update` once and only when something is missing. Needs root (or sudo).
set -eu
packages=(
  cmake ninja-build g++ ccache pkg-config
  libopenmpi-dev openmpi-bin libhwloc-dev
  libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libgloo-dev
  clang clang-format libclang-rt-14-dev python3
  dataset-fashion-mnist
  libtorch-dev python3-torch pybind11-dev python3-torchvision python3-matplotlib python3-pytest python3-pip python3-venv lmod
  slurm-wlm munge iproute2
  mmdebstrap
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
