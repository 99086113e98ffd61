#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a program outside
# the tree against it three ways — find_package(ctrial) with the shared and
# the static library, and pkg-config — and runs each.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/ctrial/ctrial.h"
test -f "$work/prefix/lib/pkgconfig/ctrial.pc"

cmake -S "$src/tests/install/consumer" -B "$work/b" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$work/b" >/dev/null
"$work/b/consumer_shared"
"$work/b/consumer_static"

PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" \
  cc -std=c11 "$src/tests/install/consumer/consumer.c" -o "$work/consumer_pc" \
     $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs ctrial) -lm
"$work/consumer_pc"
echo "install: shared, static and pkg-config consumers all passed"
