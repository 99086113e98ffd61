#!/usr/bin/env python3
"""Two hosts on one machine: ctrial's ranks in two Linux network namespaces
joined by a veth pair, talking TCP (Open MPI's tcp transport, no shared
memory between them), the link shaped by tc to a given rate. Measures what
bench/dist measures on one host — grad_sync's ring beside a bare
MPI_Allreduce, and training throughput — and checks that ct_fit across the
two "hosts" computes what one process computes.

    sudo .venv/bin/python bench/dist/two_hosts.py [BUILD_DIR] [--rates unshaped,10gbit,1gbit]
        [--per-host 1,2] [--runs 3] [--mb 1,10,100] [--steps 30] [--shard] [--json PATH] [--keep-netns]

Needs root (ip netns, tc), iproute2, and mpirun (Open MPI). Nothing is left
behind: the namespaces (and their veth pair) are removed at the end, even on
an error, unless --keep-netns.

How the two hosts are made:
  - namespaces ctrial-h0 and ctrial-h1, a veth pair between them
    (10.199.0.1/24 and 10.199.0.2/24), loopback up in each;
  - each host gets its own hostname (unshare --uts), so Open MPI sees two
    nodes: no shared-memory transport between them, and grad_sync's
    MPI_Comm_split_type tells the hosts apart: with one rank on each it
    uses the ring, with two on each shared memory on each host and a ring
    between them ("shared memory + ring");
  - each host runs on a CPU of its own (taskset -c 0, -c 1; mpirun binds
    nothing, so the ranks inherit it);
  - mpirun runs in ctrial-h0; Open MPI's rsh launcher starts the daemon of
    the second host through a small agent script (written to a temporary
    folder) that runs the command in ctrial-h1, where ssh would log in;
  - Open MPI's out-of-band and byte transports are told to use the veth's
    subnet (oob_tcp_if_include, btl_tcp_if_include) and btl tcp,self (and
    vader, its shared memory, between the ranks of one host);
  - tc: a token bucket (tbf) on each end of the veth, at the rate, with a
    burst of rate x 1 ms (at least 64 KiB) and 50 ms of queue. Latency is
    the veth's own: this kernel has no netem (CONFIG_NET_SCH_NETEM is off),
    so an added delay cannot be shaped here; the round trip of 8 bytes over
    TCP is measured and reported.

What runs on each rate, with each number of ranks per host (--per-host;
one intra-op thread each; two per host share their host's one CPU, so
their training throughput says little, their bytes per second and their
correctness do; Open MPI is then told to yield when idle, as ctrial's
ranks do on their own, so that the reference MPI_Allreduce does not spin
through its peers' time):
  bench_dist bandwidth  --mb MB (grad_sync vs MPI_Allreduce over TCP; with
                        two ranks per host both of grad_sync's transports:
                        shared memory + ring, and the ring of every rank)
  bench_dist train      (MLP 784-1024-1024-10, SGD, global batch 128; both
                        transports with two per host; --shard: Adam, its
                        state sharded across the ranks and not, each run
                        beside the other: what shard_optimizer costs or
                        saves where gradients and parameters cross hosts)
  ct_fit across hosts   examples/mnist's MLP on the bundled digits (without
                        dropout: masks are drawn per rank), 2 or 4 ranks,
                        against the same run in one process: the two runs'
                        metrics.jsonl (training loss per report, validation)
                        must agree to 1e-5 relative, as tests/dist_fit checks
                        on one host.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import run_json_lines  # noqa: E402

HOSTS = [("ctrial-h0", "10.199.0.1", "veth-ct0"), ("ctrial-h1", "10.199.0.2", "veth-ct1")]
CPUS = ["0", "1"]  # each host's own CPU (taskset): hosts do not share cores
SUBNET = "10.199.0.0/24"

AGENT = """#!/bin/sh
# Open MPI's rsh launcher calls this as ssh: AGENT HOST COMMAND... ; the
# command runs in HOST's network namespace, under HOST's own hostname.
host=$1
shift
case "$host" in
{cases}
  *) echo "two_hosts agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" taskset -c "$cpu" unshare --uts /bin/sh -c "hostname $name && exec $*"
"""


def sh(*cmd, check=True, capture=False):
    p = subprocess.run(list(cmd), capture_output=capture, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr if capture else ''}")
    return p


def teardown():
    for ns, _, _ in HOSTS:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def setup():
    teardown()
    (ns0, _, if0), (ns1, _, if1) = HOSTS
    for ns, _, _ in HOSTS:
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", if0, "netns", ns0, "type", "veth", "peer", "name", if1, "netns", ns1)
    for ns, ip, ifname in HOSTS:
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", ifname)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", ifname, "up")


def shape(rate):
    """tbf at `rate` on both ends ("unshaped": no qdisc)."""
    for ns, _, ifname in HOSTS:
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", ifname, "root"], capture_output=True)
        if rate == "unshaped":
            continue
        bits = parse_rate(rate)
        burst = max(64 * 1024, int(bits / 8 / 1000))  # 1 ms of the rate
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", ifname, "root", "tbf", "rate", rate,
           "burst", str(burst), "latency", "50ms")


def parse_rate(rate):
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for u, k in units.items():
        if rate.endswith(u):
            return float(rate[:-len(u)]) * k
    raise SystemExit(f"two_hosts.py: rate {rate!r}: use e.g. 10gbit, 1gbit, 500mbit or unshaped")


PINGPONG = r"""
import socket, statistics, sys, time
role, host = sys.argv[1], sys.argv[2]
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, 47999)); s.listen(1)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(8)
        if not b:
            break
        c.sendall(b)
else:
    for _ in range(100):
        try:
            c = socket.create_connection((host, 47999)); break
        except OSError:
            time.sleep(0.02)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for _ in range(200):
        t = time.perf_counter(); c.sendall(b"12345678"); c.recv(8); rtt.append(time.perf_counter() - t)
    print(statistics.median(rtt[20:]) * 1e3)
"""


def rtt_ms():
    """Median round trip of 8 bytes over TCP from host 0 to host 1 (ms): the link's latency as MPI's small
    messages see it (no ping on this machine; TCP_NODELAY, 180 round trips after 20 to warm up)."""
    server = subprocess.Popen(["ip", "netns", "exec", HOSTS[1][0], sys.executable, "-c", PINGPONG, "server",
                               HOSTS[1][1]])
    try:
        p = sh("ip", "netns", "exec", HOSTS[0][0], sys.executable, "-c", PINGPONG, "client", HOSTS[1][1],
               capture=True, check=False)
        return round(float(p.stdout.strip()), 4) if p.returncode == 0 and p.stdout.strip() else None
    finally:
        server.wait(timeout=10)


class Job:
    """mpirun across the two hosts, launched from host 0."""

    def __init__(self, tmp):
        self.agent = os.path.join(tmp, "ns-agent")
        cases = "\n".join(f"  {ip}|{ns}) ns={ns}; name={ns}; cpu={cpu} ;;" for (ns, ip, _), cpu in zip(HOSTS, CPUS))
        with open(self.agent, "w") as f:
            f.write(AGENT.format(cases=cases))
        os.chmod(self.agent, 0o755)

    def cmd(self, prog_args, per_host=1, env_names=("OMP_NUM_THREADS", "CTRIAL_GRAD_SYNC")):
        """per_host ranks on each host, ranks 0 .. per_host-1 on the first."""
        (ns0, ip0, _), (_, ip1, _) = HOSTS
        mpirun = ["mpirun", "--allow-run-as-root", "--host", f"{ip0}:{per_host},{ip1}:{per_host}",
                  "-np", str(2 * per_host), "--map-by", "slot", "--bind-to", "none",
                  "--mca", "plm_rsh_agent", self.agent, "--mca", "btl", "tcp,self" if per_host == 1 else "tcp,vader,self",
                  "--mca", "btl_tcp_if_include", SUBNET, "--mca", "oob_tcp_if_include", SUBNET]
        if per_host > 1:
            # more ranks than the host's one CPU: MPI_Allreduce (the reference) would spin through the time its
            # peers need (ctrial sees the shared cpuset and yields on its own, dist.c)
            mpirun += ["--mca", "mpi_yield_when_idle", "1"]
        for name in env_names:
            mpirun += ["-x", name]
        inner = " ".join(_quote(x) for x in mpirun + list(prog_args))
        return ["ip", "netns", "exec", ns0, "taskset", "-c", CPUS[0], "unshare", "--uts", "/bin/sh", "-c",
                f"hostname {ns0} && exec {inner}"]


def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def read_metrics(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def fit_agrees(job, mnist, tmp, env, per_host):
    """examples/mnist's MLP for 60 batches (a validation every 20) across the two hosts (per_host ranks on each)
    and in one process: (ok, message)."""
    cfg = os.path.join(tmp, "mlp.json")
    with open(os.path.join(ROOT, "examples", "mnist", "mnist_mlp.json")) as f:
        c = json.load(f)
    c["searcher"]["max_length"] = {"batches": 60}
    # no dropout: each rank draws its own rows' masks, one process draws the whole batch's (different numbers,
    # both right); everything else is the same arithmetic up to the order of the gradient sums
    c["hyperparameters"]["dropout2"] = 0.0
    c["min_validation_period"] = {"batches": 20}
    c["scheduling_unit"] = 10
    c.setdefault("data", {})["dir"] = os.path.join(ROOT, "examples", "data", "digits")
    with open(cfg, "w") as f:
        json.dump(c, f)
    outs = {}
    for where in ("one process", "two hosts"):
        out = os.path.join(tmp, where.replace(" ", "_"))
        args = [mnist, "--config", cfg, "--output", out, "--overwrite", "--quiet", "--threads", "1"]
        cmd = job.cmd(args, per_host) if where == "two hosts" else args
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        if p.returncode != 0:
            return False, f"ct_fit on {where} exited {p.returncode}: {p.stderr[-1500:]}"
        outs[where] = read_metrics(os.path.join(out, "metrics.jsonl"))
    a, b = outs["one process"], outs["two hosts"]
    keys = [("training", "loss"), ("validation", "validation_loss"), ("validation", "validation_accuracy")]
    worst, n = 0.0, 0
    for group, key in keys:
        xs = [r["metrics"][key] for r in a if r["group"] == group]
        ys = [r["metrics"][key] for r in b if r["group"] == group]
        if len(xs) != len(ys) or not xs:
            return False, f"{group} {key}: {len(xs)} reports in one process, {len(ys)} across the hosts"
        for x, y in zip(xs, ys):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-12))
            n += 1
    ok = worst <= 1e-5
    return ok, f"{n} reported values (training loss, validation loss and accuracy): largest relative difference " \
               f"{worst:.2e} ({'equal' if ok else 'DIFFERENT'} at 1e-5)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--rates", default="unshaped,10gbit,1gbit")
    ap.add_argument("--per-host", default="1,2", help="ranks on each host, a list")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", default="1,10,100")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--shard", action="store_true", help="train with Adam, sharded (shard_optimizer) and not")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--keep-netns", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("two_hosts.py: needs root (ip netns, tc)")
    for tool in ("ip", "tc", "mpirun", "unshare"):
        if not shutil.which(tool):
            sys.exit(f"two_hosts.py: {tool} is not on PATH")
    build = os.path.abspath(a.build_dir)
    prog = os.path.join(build, "bench", "dist", "bench_dist")
    mnist = os.path.join(build, "examples", "mnist", "mnist")
    for p in (prog, mnist):
        if not os.access(p, os.X_OK):
            sys.exit(f"two_hosts.py: {p} is not built")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("CTRIAL_GRAD_SYNC", None)
    ring_env = dict(env, CTRIAL_GRAD_SYNC="ring")
    per_host = [int(k) for k in a.per_host.split(",")]
    trains = [["--optim", "adam", "--shard", "0"], ["--optim", "adam", "--shard", "1"]] if a.shard else [[]]
    results = {"rates": {}, "meta": {"runs": a.runs, "mb": a.mb, "steps": a.steps, "reps": a.reps}}
    tmp = tempfile.mkdtemp(prefix="ctrial_two_hosts_")
    try:
        setup()
        job = Job(tmp)
        for rate in a.rates.split(","):
            shape(rate)
            rr = {"rtt_ms": rtt_ms(), "layouts": {}}
            for k in per_host:
                # with one rank per host the default is the ring already
                envs = [env] if k == 1 else [env, ring_env]
                lay = {"bandwidth": {}, "train": []}
                for _ in range(a.runs):  # the transports interleaved
                    for e in envs:
                        bw = job.cmd([prog, "bandwidth", "--mb", a.mb, "--reps", str(a.reps)], k)
                        for r in run_json_lines(bw, e):
                            lay["bandwidth"].setdefault(r["transport"], {}).setdefault(str(r["mb"]), []).append(r)
                        for t in trains:
                            lay["train"] += run_json_lines(job.cmd([prog, "train", "--steps", str(a.steps)] + t, k), e)
                ok, msg = fit_agrees(job, mnist, tmp, env, k)
                lay["fit_agrees"], lay["fit_message"] = ok, msg
                rr["layouts"][str(k)] = lay
                print(f"[{rate}, {k} per host] ct_fit across hosts: {msg}", file=sys.stderr, flush=True)
            results["rates"][rate] = rr
            print(f"[{rate}] rtt {rr['rtt_ms']} ms", file=sys.stderr, flush=True)
    finally:
        if not a.keep_netns:
            teardown()
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
    sys.exit(0 if all(lay["fit_agrees"] for r in results["rates"].values() for lay in r["layouts"].values()) else 1)


def report(results):
    med = statistics.median

    def fmt(xs, f="{:.3f}"):
        return f"{f.format(med(xs))} [{f.format(min(xs))}, {f.format(max(xs))}]"

    print("## Two hosts (network namespaces, Open MPI over TCP)\n")
    print("| link | round trip ms | ranks per host | transport | MB | grad_sync GB/s | MPI_Allreduce GB/s | ratio |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for rate, rr in results["rates"].items():
        for k, lay in rr["layouts"].items():
            for transport, by_mb in lay["bandwidth"].items():
                for mb, rs in by_mb.items():
                    print(f"| {rate} | {rr['rtt_ms']} | {k} | {transport} | {float(mb):g} | "
                          f"{fmt([r['sync_gbs'] for r in rs])} | {fmt([r['allreduce_gbs'] for r in rs])} | "
                          f"{fmt([r['ratio'] for r in rs], '{:.2f}')} |")
    print()
    print("| link | ranks per host | transport | optimizer | samples/s (MLP 784-1024-1024-10, global batch 128) | "
          "ms/step | sync ms/step | optimizer ms/step | gradient MB sent/step |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for rate, rr in results["rates"].items():
        for k, lay in rr["layouts"].items():
            kinds = dict.fromkeys((r["transport"], r["optim"], r["shard"]) for r in lay["train"])
            for transport, optim, shard in kinds:
                rs = [r for r in lay["train"] if (r["transport"], r["optim"], r["shard"]) == (transport, optim, shard)]
                print(f"| {rate} | {k} | {transport} | {optim}{', sharded' if shard else ''} | "
                      f"{fmt([r['samples_per_s'] for r in rs], '{:.0f}')} | {med(r['ms_per_step'] for r in rs):.2f} | "
                      f"{med(r['sync_ms'] for r in rs):.2f} | {med(r['optimizer_ms'] for r in rs):.2f} | "
                      f"{med(r['grad_mb_sent_per_step'] for r in rs):.2f} |")
    print()
    print("| link | ranks per host | ct_fit across hosts vs one process |")
    print("|---|---:|---|")
    for rate, rr in results["rates"].items():
        for k, lay in rr["layouts"].items():
            print(f"| {rate} | {k} | {lay['fit_message']} |")
    print()


if __name__ == "__main__":
    main()
