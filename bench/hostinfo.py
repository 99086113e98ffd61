"""Small helpers the bench/*/run.py scripts share: what machine this is, how
loaded it is, and running a benchmark program that reports in JSON lines.

    sys.path.insert(0, os.path.dirname(HERE))  # HERE: the script's folder
    import hostinfo
"""
import json
import os
import subprocess

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)


def machine():
    """(CPU count, CPU model name from /proc/cpuinfo or "unknown")."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return os.cpu_count(), model


def load():
    """The 1, 5 and 15 minute load averages as one string, "?" if unknown."""
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _stdout(cmd, env):
    """cmd's stdout, run from the repository root; RuntimeError with the end
    of its stderr if it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout


def run_json_lines(cmd, env=None):
    """Run cmd from the repository root; the JSON objects of the lines of its
    stdout that start with "{", in order (RuntimeError if there are none)."""
    out = _stdout(cmd, env)
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if not rows:
        raise RuntimeError(f"no JSON line from {' '.join(cmd)}:\n{out}")
    return rows


def run_json(cmd, env=None):
    """Run cmd from the repository root; the JSON object on the last line of
    its stdout that starts with "{" (RuntimeError if there is none)."""
    out = _stdout(cmd, env)
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line from {' '.join(cmd)}:\n{out}")

