#!/usr/bin/env bash
# Download the cp312 wheels the GPU machine lacks into .whl/ (git-ignored), to carry with a device call:
# numpy 2.4 (numba-cuda 0.30.4 cannot import its CUDA target with numpy 2.5), xdsl, its dependencies
# immutabledict and ordered-set, and gguf. Run here, where the package index is reachable:
#     bash bench/wheels.sh
# then on the device, from the repository root: `. bench/device_env.sh && <command>`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --dest .whl \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    "numpy==2.4.6" "xdsl==0.74.0" immutabledict ordered-set "gguf==0.19.0"
ls .whl
