#!/usr/bin/env bash
# tests/install/run.sh BUILD SRC RUNPATH — the installed package, used the way
# a program outside the tree uses it (RUNPATH: the ':'-list the installed
# libctrial.so must record for libtorch & co., CTRIAL_TORCH_RPATH's result).
#  1. Installs BUILD into a prefix, moves the prefix elsewhere (the original
#     is gone) and checks what the installed files point at.
#  2. Builds a ct_main trial (examples/onevar/main.c) against the moved
#     prefix four ways — find_package(ctrial) with ctrial::ctrial and with
#     ctrial::ctrial_static, pkg-config ctrial and pkg-config --static
#     ctrial-static — and runs each: 8 batches, metrics.jsonl with the exact
#     numbers, a checkpoint the installed ctrial-ckpt finds and verifies.
#  3. Points programs at "another libtorch" (a copy of this one, made of
#     links) the ways the README gives: LD_LIBRARY_PATH at run time (shared
#     and static programs), pkg-config's torchlibdir and CMake's
#     ctrial_TORCH_LIBDIR at a static program's link time.
set -euo pipefail
build=$1 src=$2 want_rpath=${3-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$SECONDS
say() { echo "install: $* ($((SECONDS - t0)) s)"; }
fail() { echo "install: FAIL: $*" >&2; exit 1; }
runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
needs() { readelf -d "$1" | grep -q "(NEEDED).*\[$2"; }

# ---- 1. install, move, inspect -------------------------------------------------
cmake --install "$build" --prefix "$work/first" >/dev/null
mv "$work/first" "$work/prefix"
prefix=$work/prefix
test ! -e "$work/first"
lib=$(dirname "$(find "$prefix" -name libctrial.so -print -quit)")
ckpt_tool=$prefix/bin/ctrial-ckpt
test -f "$prefix/include/ctrial/ctrial.h" && test -x "$ckpt_tool"
export PKG_CONFIG_PATH=$lib/pkgconfig
# No installed text file names the build tree (binaries' debug info may).
if grep -rlI -- "$build" "$prefix"; then fail "the files above name the build tree $build"; fi
rp=$(runpath "$lib/libctrial.so")
[ "$rp" = "$want_rpath" ] || fail "libctrial.so's RUNPATH is '$rp', not '$want_rpath'"
# shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
[ "$(runpath "$ckpt_tool")" = '$ORIGIN/../'"${lib#"$prefix"/}" ] ||
  fail "ctrial-ckpt's RUNPATH is '$(runpath "$ckpt_tool")'"
say "installed and moved to $prefix; libctrial.so RUNPATH $rp"

# ---- 2. four consumers of the moved prefix ----------------------------------------
trial_src=$src/examples/onevar/main.c
cmake -S "$src/tests/install/consumer" -B "$work/b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DTRIAL_SOURCE="$trial_src" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$work/b" >/dev/null
say "built trial_shared, trial_static (find_package)"
# pc_link OUTPUT PKG-CONFIG-ARGS...: links the trial with pkg-config's flags.
pc_link() {
  local out=$1 flags
  shift
  read -ra flags <<<"$(pkg-config "$@")"
  cc -std=c11 -O1 "$trial_src" -o "$out" "${flags[@]}"
}
pc_link "$work/trial_pc" --cflags --libs ctrial
pc_link "$work/trial_pc_static" --static --cflags --libs ctrial-static
say "built trial_pc, trial_pc_static (pkg-config)"
# ctrial.pc's Libs.private is the archive's dependencies too.
pc_private=" $(pkg-config --static --libs ctrial) "
for f in $(pkg-config --libs ctrial-static); do
  case $f in */libctrial.a) ;; *) [[ $pc_private == *" $f "* ]] || fail "pkg-config --static --libs ctrial lacks $f" ;; esac
done

# run NAME BINARY [ENV...]: trains onevar 8 batches into $work/out-NAME and checks it.
run() {
  local name=$1 bin=$2 out=$work/out-$1
  shift 2
  env "$@" "$bin" --config "$src/examples/onevar/onevar.json" --output "$out" --max-length 8 \
      --validation-period 4 --checkpoint-period 8 --threads 1 --no-tensorboard --quiet ||
    fail "$name exited $?"
  local m=$out/metrics.jsonl
  if [ "$(grep -c '"group":"training"' "$m")" -ne 2 ] || [ "$(grep -c '"group":"validation"' "$m")" -ne 2 ]; then
    fail "$name: metrics.jsonl has not 2 training and 2 validation reports: $(cat "$m")"
  fi
  # After 8 batches of SGD(lr 0.001) from w = 0 the weight is 1 - 0.998^8.
  grep '"group":"validation"' "$m" | tail -n 1 | grep -o '"weight":[-0-9.eE+]*' | cut -d: -f2 |
    awk '{ d = $1 - (1 - 0.998^8); exit !(d < 1e-6 && d > -1e-6) }' ||
    fail "$name: wrong final weight: $(tail -n 1 "$m")"
  local ck
  ck=$("$ckpt_tool" latest "$out/checkpoints") || fail "$name: ctrial-ckpt latest failed"
  [[ $ck == *ckpt-000008-* ]] || fail "$name: ctrial-ckpt latest said '$ck'"
  "$ckpt_tool" verify "$out/checkpoints"/ckpt-000008-* >/dev/null || fail "$name: ctrial-ckpt verify failed"
}
# resolves BINARY LIB [ENV...]: the path the loader takes LIB from
# (normalized, links kept; nothing if it does not load LIB).
resolves() {
  local bin=$1 so=$2 at
  shift 2
  at=$(env "$@" ldd "$bin" | awk -v so="$so" '$1 == so { print $3 }')
  [ -z "$at" ] || realpath -ms "$at"
}
for b in "$work/b/trial_shared" "$work/trial_pc"; do
  needs "$b" libctrial.so || fail "$b does not link libctrial.so"
  [ "$(resolves "$b" libctrial.so.0)" = "$lib/libctrial.so.0" ] || fail "$b does not load the moved libctrial.so"
done
for b in "$work/b/trial_static" "$work/trial_pc_static"; do
  ! needs "$b" libctrial.so || fail "$b links libctrial.so, not the archive"
  for so in $(readelf -d "$lib/libctrial.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
    # What libctrial.so needs, the static program loads (if at all: with
    # --as-needed it skips libtorch.so) from where libctrial.so does.
    at=$(resolves "$b" "$so")
    [ -z "$at" ] || [ "$at" = "$(resolves "$lib/libctrial.so" "$so")" ] ||
      fail "$b loads $so from '$at', libctrial.so from '$(resolves "$lib/libctrial.so" "$so")'"
  done
done
run cmake-shared "$work/b/trial_shared"
run cmake-static "$work/b/trial_static"
run pc-shared "$work/trial_pc"
run pc-static "$work/trial_pc_static"
say "the four trials trained; ctrial-ckpt (moved) verified their checkpoints"

# ---- 3. another libtorch -------------------------------------------------------
# A copy of libtorch's folder (and of the torch wheel's nvidia/ beside it),
# of hard links where the file system allows, else symbolic ones.
torchlib=$(pkg-config --variable=torchlibdir ctrial)
site=$(cd "$torchlib/../.." && pwd)
torchrel=${torchlib#"$site"/} # torch/lib (a wheel) or libtorch/lib (the zip)
other=$work/other
for d in "$torchrel" nvidia; do
  [ -d "$site/$d" ] || continue
  mkdir -p "$(dirname "$other/$d")"
  cp -rl "$site/$d" "$other/$d" 2>/dev/null || { rm -rf "${other:?}/$d"; cp -rs "$site/$d" "$other/$d"; }
done
# The recorded run path with the copy in place of the original.
other_path=${rp//"$site"/"$other"}
[ "$other_path" != "$rp" ] || fail "libctrial.so's RUNPATH '$rp' names nothing under $site"
# At run time: LD_LIBRARY_PATH, searched before RUNPATH.
for b in "$work/b/trial_shared" "$work/b/trial_static"; do
  for so in libtorch_cpu.so libc10.so; do
    [[ $(resolves "$b" $so LD_LIBRARY_PATH="$other_path") == "$other/"* ]] ||
      fail "with LD_LIBRARY_PATH, $b still loads $so from $(resolves "$b" $so LD_LIBRARY_PATH="$other_path")"
  done
done
run ldpath-shared "$work/b/trial_shared" LD_LIBRARY_PATH="$other_path"
run ldpath-static "$work/b/trial_static" LD_LIBRARY_PATH="$other_path"
# At the static link: pkg-config's torchlibdir and CMake's ctrial_TORCH_LIBDIR
# name the copy, which the program then records as its run path.
pc_link "$work/trial_pc_other" --define-variable=torchlibdir="$other/$torchrel" --static --cflags --libs ctrial-static
cmake -S "$src/tests/install/consumer" -B "$work/b-other" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DTRIAL_SOURCE="$trial_src" -DCMAKE_BUILD_TYPE=Release -Dctrial_TORCH_LIBDIR="$other/$torchrel" >/dev/null
ninja -C "$work/b-other" trial_static >/dev/null
for b in "$work/trial_pc_other" "$work/b-other/trial_static"; do
  for so in libtorch_cpu.so libc10.so; do
    [[ $(resolves "$b" $so) == "$other/"* ]] ||
      fail "linked against the copy, $b loads $so from $(resolves "$b" $so)"
  done
done
run pc-other-static "$work/trial_pc_other"
run cmake-other-static "$work/b-other/trial_static"
say "LD_LIBRARY_PATH, torchlibdir and ctrial_TORCH_LIBDIR point programs at another copy of libtorch"
echo "install: all passed"
