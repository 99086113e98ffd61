#!/usr/bin/env bash
# Installs everything ctrial needs on a Debian/Ubuntu machine, idempotently:
# Debian packages (compiler, CMake, OpenMPI, jansson, libyaml, zlib, libpng, libjpeg-turbo, libcurl, libxml2,
# ccache) and a
# project-local virtual environment (.venv) holding the pinned torch wheel,
# whose libtorch the build links against, and numpy for the parity tests.
# Takes seconds when everything is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
TORCH_VERSION=2.11.0
NUMPY_SPEC='numpy>=1.26,<3'

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

debs=(build-essential cmake ninja-build ccache pkg-config git
      libopenmpi-dev openmpi-bin libjansson-dev libyaml-dev zlib1g-dev libpng-dev libjpeg-dev
      libcurl4-openssl-dev libxml2-dev
      python3 python3-venv clang libclang-rt-dev)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_ apt-get update -qq
  sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv="$root/.venv"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi
# tensorboard: tests/tbevents reads ctrial's event files back with its readers.
# torchvision (the release built against TORCH_VERSION, without its
# dependencies so that torch stays as pinned): tests/ops calls its operators
# from C and compares them with Python's, and tests/vision compares images
# and transforms with its; Pillow writes the test images torchvision cannot
# (palette, interlaced and 16-bit PNGs) and is ImageFolder's loader.
TENSORBOARD_VERSION=2.21.0
TORCHVISION_VERSION=0.26.0
PILLOW_VERSION=13.0.0
have=$("$py" - <<PY 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("torch"), m.version("numpy"), m.version("tensorboard"), m.version("torchvision"),
          m.version("pillow"))
except Exception:
    pass
PY
)
case "$have" in
  "$TORCH_VERSION"*" "*" $TENSORBOARD_VERSION $TORCHVISION_VERSION"*" $PILLOW_VERSION") ;;
  *)
    echo "setup: installing torch==$TORCH_VERSION, numpy, tensorboard, torchvision and pillow into $venv (large download, once)"
    "$py" -m pip install -q --upgrade pip
    "$py" -m pip install -q "torch==$TORCH_VERSION" "$NUMPY_SPEC" "tensorboard==$TENSORBOARD_VERSION"
    "$py" -m pip install -q --no-deps "torchvision==$TORCHVISION_VERSION"
    "$py" -m pip install -q "pillow==$PILLOW_VERSION"
    ;;
esac

# moto's server: tests/store runs a real S3-compatible store on 127.0.0.1
# (signatures checked) for the checkpoints kept in S3.
MOTO_VERSION=5.2.5
if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" 2>/dev/null; then
  echo "setup: installing moto[server]==$MOTO_VERSION into $venv"
  "$py" -m pip install -q "moto[server]==$MOTO_VERSION"
fi
# Lightning: tests/callbacks compares the stock callbacks with its own.
LIGHTNING_VERSION=2.6.6
if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('lightning') != '$LIGHTNING_VERSION')" 2>/dev/null; then
  echo "setup: installing lightning==$LIGHTNING_VERSION into $venv"
  "$py" -m pip install -q "lightning==$LIGHTNING_VERSION"
fi
# Determined's harness: tests/loop runs its Trainer (local mode) beside
# ctrial. Without its dependencies, which pin an older requests and pull in
# cloud SDKs: determined.pytorch imports with these four.
DETERMINED_VERSION=0.38.1
if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('determined') != '$DETERMINED_VERSION')" 2>/dev/null; then
  echo "setup: installing determined==$DETERMINED_VERSION (without its dependencies) into $venv"
  "$py" -m pip install -q --no-deps "determined==$DETERMINED_VERSION" ruamel.yaml==0.19.1 psutil==7.2.2 \
    appdirs==1.4.4 pathspec==1.1.1
fi
