#!/usr/bin/env bash
# Installs the optional dependencies of bench/compare (Determined's
# PyTorchTrial, PyTorch Lightning's Trainer, and matplotlib for the chart of
# bench/compare/run.py) and of bench/search (Optuna) into the project's venv
# (.venv, made by tools/setup.sh), idempotently. Not part of the test set-up:
# nothing in the build or .ci/run needs these packages.
#
# The torch (and numpy) already in the venv are held fixed with a pip
# constraints file, so resolving determined/lightning/optuna can never up- or
# downgrade them; afterwards the script checks that torch.__version__ is
# unchanged and that every package imports.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"

# Versions checked against torch 2.11 (CPU and CUDA wheels), Python 3.11.
# determined declares no torch requirement at all; lightning 2.6 asks for
# torch>=2.1. Both are the newest releases at the time of writing.
# optuna (bench/search) needs no torch at all (numpy, sqlalchemy, alembic,
# colorlog, tqdm, PyYAML); 5.0.0 is its newest release at the time of writing.
DETERMINED_VERSION=0.38.1
LIGHTNING_VERSION=2.6.6
MATPLOTLIB_VERSION=3.11.2   # determined needs it too
OPTUNA_VERSION=5.0.0

fail() { echo "bench-setup: $*" >&2; exit 1; }

[ -x "$py" ] || fail "no $root/.venv; run 'bash tools/setup.sh' first (it installs torch)"
torch_before=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) \
  || fail "torch does not import in .venv; run 'bash tools/setup.sh' first"

have=$("$py" - <<'PY' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("determined"), m.version("lightning"), m.version("matplotlib"), m.version("optuna"))
except Exception:
    pass
PY
)
if [ "$have" = "$DETERMINED_VERSION $LIGHTNING_VERSION $MATPLOTLIB_VERSION $OPTUNA_VERSION" ]; then
  echo "bench-setup: determined $DETERMINED_VERSION, lightning $LIGHTNING_VERSION, matplotlib $MATPLOTLIB_VERSION and optuna $OPTUNA_VERSION already installed (torch $torch_before)"
  exit 0
fi

constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$py" - >"$constraints" <<'PY'
import importlib.metadata as m
# Pin what the project's own set-up installed: torch and everything torch
# ships with it (its CUDA wheels, triton), and numpy.
pins = {"torch", "numpy", "triton"}
for d in m.distributions():
    name = d.metadata["Name"]
    if name.lower().startswith(("nvidia-", "cuda-")) or name.lower() in pins:
        print(f"{name}=={d.version}")
PY

echo "bench-setup: installing determined==$DETERMINED_VERSION lightning==$LIGHTNING_VERSION matplotlib==$MATPLOTLIB_VERSION optuna==$OPTUNA_VERSION into .venv (torch $torch_before held fixed)"
if ! "$py" -m pip install --disable-pip-version-check -q -c "$constraints" \
      "determined==$DETERMINED_VERSION" "lightning==$LIGHTNING_VERSION" "matplotlib==$MATPLOTLIB_VERSION" \
      "optuna==$OPTUNA_VERSION"; then
  fail "pip could not install determined==$DETERMINED_VERSION / lightning==$LIGHTNING_VERSION / matplotlib==$MATPLOTLIB_VERSION / optuna==$OPTUNA_VERSION without changing torch $torch_before (constraints: $(tr '\n' ' ' <"$constraints")); see pip's error above"
fi

torch_after=$("$py" -c 'import torch; print(torch.__version__)')
[ "$torch_after" = "$torch_before" ] || fail "torch changed from $torch_before to $torch_after (should not happen with the constraints)"
"$py" -c 'import determined, determined.pytorch, lightning, matplotlib, optuna; print("bench-setup: ok: determined", determined.__version__, "lightning", lightning.__version__, "matplotlib", matplotlib.__version__, "optuna", optuna.__version__)' \
  || fail "installed, but determined, lightning, matplotlib or optuna does not import"
echo "bench-setup: torch $torch_after unchanged"
