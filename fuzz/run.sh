#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + libFuzzer) and runs
# each for SECONDS on a scratch copy of its seed corpus:
#
#     fuzz/run.sh BUILD_DIR SRC_DIR [SECONDS]
#
# The code under test is compiled into each fuzzer with instrumentation:
# the dataset readers (src/dataset.c, idx.c, csv.c, records.c) for idx and
# csv, PyTorch's file format (src/pth_*.c) for pth (whole archives) and pkl
# (the pickle machine alone, past the CRCs that stop mutated archives); the rest of the API
# comes from BUILD_DIR's libctrial.so (gcc, uninstrumented). Crashing inputs
# are kept in BUILD_DIR/fuzz/ and the script fails. clang comes with
# tools/setup.sh.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) secs=${3:-10}
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
  echo "fuzz: clang not found; run tools/setup.sh (it installs clang and libclang-rt-dev)" >&2
  exit 1
fi
if ldd "$build/libctrial.so" 2>/dev/null | grep -q libasan; then
  echo "fuzz: $build/libctrial.so is built with gcc's ASan (CTRIAL_SANITIZE=ON), which cannot" \
       "share a process with clang's fuzzer runtime; run this in a build without it" >&2
  exit 1
fi
out=$build/fuzz
mkdir -p "$out"
cflags=(-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -I"$src/include" -I"$build/include" -I"$src/src")
readers=("$src/src/data/dataset.c" "$src/src/data/idx.c" "$src/src/data/csv.c" "$src/src/data/records.c" "$src/src/base/files.c" "$src/src/base/crc32.c"
         "$src/fuzz/support.c")
pth=("$src"/src/pth/*.c "$src"/src/base/crc32.c)
targets=(idx csv pth pkl)
sources_of() {  # sources_of TARGET: the instrumented sources beside fuzz_TARGET.c
  case $1 in
    pth | pkl) printf '%s\n' "${pth[@]}" ;;
    *) printf '%s\n' "${readers[@]}" ;;
  esac
}
# Rebuilt only when a source or header changed (the compile is most of the time).
stale() {  # stale BINARY SOURCES...
  local bin=$1; shift
  [ -x "$bin" ] || return 0
  local f
  for f in "$@" "$src"/include/ctrial/*.h "$src"/src/*/*.h; do [ "$f" -nt "$bin" ] && return 0; done
  return 1
}
for target in "${targets[@]}"; do
  mapfile -t sources < <(sources_of "$target")
  stale "$out/fuzz_$target" "$src/fuzz/fuzz_$target.c" "${sources[@]}" || continue
  if ! "$cc" "${cflags[@]}" "$src/fuzz/fuzz_$target.c" "${sources[@]}" \
       -L"$build" -lctrial -lz -lpthread -Wl,-rpath,"$build" -o "$out/fuzz_$target" 2>"$out/build_$target.log"; then
    cat "$out/build_$target.log" >&2
    if grep -q "fsanitize=fuzzer\|libclang_rt.fuzzer" "$out/build_$target.log"; then
      echo "fuzz: clang cannot link libFuzzer; install libclang-rt-dev (tools/setup.sh)" >&2
    fi
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  cp "$src/fuzz/corpus/$target"/* "$work/$target/"
  echo "fuzz: $target for ${secs}s"
  # New inputs go to the scratch copy; the seeds in the tree stay as they are.
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
       "$out/fuzz_$target" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
       -max_len=4096 -artifact_prefix="$out/crash_${target}_" "$work/$target" \
       >"$out/run_$target.log" 2>&1; then
    tail -n 60 "$out/run_$target.log" >&2
    echo "fuzz: $target failed; the input is in $out/crash_${target}_*" >&2
    status=1
  else
    grep -E "^#[0-9]+.*(DONE|pulse)" "$out/run_$target.log" | tail -n 1
  fi
done
exit $status
