#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS on a scratch copy of
# its seed corpus:
#
#     fuzz/run.sh BUILD_DIR SRC_DIR [SECONDS]
#
# The fuzzers are SRC_DIR/fuzz/CMakeLists.txt, a CMake project of its own
# built with clang under BUILD_DIR/fuzz: ctrial's C modules compiled with
# libFuzzer's coverage and ASan + UBSan, each fuzzer linked with the modules
# it exercises. The pure-C ones link no libtorch: idx and csv (the parsers
# of module formats), gzip (the layer every data file is read through),
# config (ct_main's flags over an experiment config), yaml (YAML configs:
# the reader, then the config loader over what it reads), pth (whole archives,
# from memory and from a file), pkl (the pickle machine alone, past the
# CRCs that stop mutated archives) and pt2 (torch.export's archives, and
# their programs' JSON alone). wire (value_wire: bytes from other
# ranks), records (the fixed-size records reader), shards (llm.c's token
# shards, mapped), image (JPEG and PNG decoding) and restore (ct_fit
# resuming from a fuzzed metadata.json or trial state) link BUILD_DIR's
# shim archive (fuzz-shim/libctrial_shim.a, made by the test suite's build)
# and the libtorch BUILD_DIR was configured with: a release build's (the
# suite runs it there only). It is configured on the first run and rebuilt
# incrementally after that. A target that does not build,
# or whose run finds a crash, leak or failed check, fails the script;
# crashing inputs are kept in BUILD_DIR/fuzz/crash_TARGET_*. clang and
# libFuzzer's runtime come with tools/setup.sh. CTRIAL_FUZZ_TARGETS="pt2 pth"
# runs only those targets.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) secs=${3:-10}
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cc" ]; then
  echo "fuzz: clang not found; run tools/setup.sh (it installs clang and libclang-rt-dev)" >&2
  exit 1
fi
out=$build/fuzz
targets=(${CTRIAL_FUZZ_TARGETS:-idx csv gzip config yaml pth pkl pt2 wire records shards image restore})
mkdir -p "$out"

# The shim and libtorch of BUILD_DIR (the test suite's build makes the archive).
shim=$build/fuzz-shim/libctrial_shim.a
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ ! -f "$shim" ] || [ -z "$torch_dir" ]; then
  echo "fuzz: $shim or the Torch_DIR of $build/CMakeCache.txt is missing (build the test suite first)" >&2
  exit 1
fi

# Configured once (Ninja when there is one); later builds re-run CMake
# themselves when a CMakeLists.txt changed or a module gained a source file.
if [ ! -f "$out/CMakeCache.txt" ] || { [ ! -f "$out/build.ninja" ] && [ ! -f "$out/Makefile" ]; } ||
   ! grep -qx "CTRIAL_SHIM_ARCHIVE:FILEPATH=$shim" "$out/CMakeCache.txt"; then
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cxx=$(command -v clang++-14 || command -v clang++)
  if ! cmake -S "$src/fuzz" -B "$out" "${generator[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
       -DCTRIAL_SHIM_ARCHIVE="$shim" -DTorch_DIR="$torch_dir" \
       >"$out/configure.log" 2>&1; then
    cat "$out/configure.log" >&2
    echo "fuzz: configuring $src/fuzz in $out failed" >&2
    exit 1
  fi
fi

status=0
built=()
for target in "${targets[@]}"; do
  if cmake --build "$out" --target "fuzz_$target" --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
       >"$out/build_$target.log" 2>&1; then
    built+=("$target")
  else
    tail -n 40 "$out/build_$target.log" >&2
    echo "fuzz: building fuzz_$target failed (all of it in $out/build_$target.log)" >&2
    status=1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in "${built[@]}"; do
  mkdir -p "$work/$target"
  cp "$src/fuzz/corpus/$target"/* "$work/$target/"
  # restore's trial state is about 8 KB in value_wire's encoding, and the
  # JSON of a small exported program about as much.
  max_len=4096
  if [ "$target" = restore ] || [ "$target" = pt2 ]; then max_len=16384; fi
  echo "fuzz: $target for ${secs}s"
  # New inputs go to the scratch copy; the seeds in the tree stay as they are.
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
       "$out/fuzz_$target" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
       -max_len="$max_len" -artifact_prefix="$out/crash_${target}_" "$work/$target" \
       >"$out/run_$target.log" 2>&1; then
    tail -n 60 "$out/run_$target.log" >&2
    echo "fuzz: $target failed; the input is in $out/crash_${target}_*" >&2
    status=1
  else
    grep -E "^#[0-9]+.*(DONE|pulse)" "$out/run_$target.log" | tail -n 1
  fi
done
exit $status
