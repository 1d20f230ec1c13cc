"""Shared by bench/run.py and bench/soak.py: start the simulator and the daemon as child
processes on 127.0.0.1, read their CPU and memory from /proc and wait4, and format figures."""

import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# INFERPROBE_BIN picks another build (CI's short soak uses the debug binary `cargo test` built).
BIN = Path(os.environ.get("INFERPROBE_BIN", ROOT / "target" / "release" / "inferprobe")).resolve()
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- processes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, headers=None, timeout=10.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def scrape_repeatedly(port, accept, n):
    """`n` back-to-back GETs of /metrics over one keep-alive connection: the seconds each
    took, and the last body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times, body = [], b""
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            conn.request("GET", "/metrics", headers={"Accept": accept})
            body = conn.getresponse().read()
            times.append(time.perf_counter() - t0)
    finally:
        conn.close()
    return times, body


def wait_until_up(port, path, proc, what, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            proc.log.flush()
            tail = Path(proc.log.name).read_text(errors="replace")[-2000:]
            sys.exit(f"{what} exited with {proc.poll()}:\n{tail}")
        try:
            if http_get(port, path, timeout=1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"{what} did not answer {path} on 127.0.0.1:{port} within {seconds} s")


class Proc:
    """A child process whose CPU time is read from its own wait4 rusage (peak RSS from VmHWM:
    Linux carries ru_maxrss across exec, so it would count the forking Python process),
    so the simulator's cost never leaks into the probe's figures."""

    def __init__(self, args, log, env=None):
        self.log = open(log, "wb")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                  env={**os.environ, **(env or {})})
        self.rusage = None
        self.peak_kib = 0  # VmHWM as last seen by wait()

    @property
    def pid(self):
        return self.p.pid

    def poll(self):
        return self.p.poll()

    def status_kib(self, key):
        """A field of /proc/PID/status: kB for the Vm* fields, a count for Threads."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise KeyError(key)

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def sockets_to(self, port):
        """Its open TCP sockets whose remote port is `port` (in any state): the probe's
        connections to a server there, in flight or idle in the client's pool."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                rows = Path(table).read_text().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                cols = row.split()
                if len(cols) > 9 and int(cols[2].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
        count = 0
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                link = os.readlink(f"/proc/{self.pid}/fd/{fd}")
            except OSError:
                continue  # closed since the listing
            if link.startswith("socket:[") and link[8:-1] in inodes:
                count += 1
        return count

    def cpu_seconds(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def wait(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.peak_kib = max(self.peak_kib, self.status_kib("VmHWM"))
            except (OSError, KeyError):
                pass  # exited (a zombie has no VmHWM) or not yet exec'd
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.rusage = rusage
                self.p.returncode = os.waitstatus_to_exitcode(status)
                self.log.close()
                return self.p.returncode
            time.sleep(0.05)
        self.p.kill()
        return self.wait(5)

    def stop(self):
        if self.rusage is None:
            self.p.terminate()
            self.wait(30)

    def cpu_total(self):
        return self.rusage.ru_utime + self.rusage.ru_stime


def simulator(work, name, *flags, cpus=None):
    """`cpus` (e.g. "0") pins it with taskset."""
    port = free_port()
    pin = ["taskset", "-c", cpus] if cpus else []
    proc = Proc([*pin, str(BIN), "simulate", "--listen", f"127.0.0.1:{port}", *flags], work / f"{name}.log")
    wait_until_up(port, "/health", proc, "the simulator")
    return proc, port


def daemon(work, name, config, env=None):
    path = work / f"{name}.toml"
    path.write_text(config)
    proc = Proc([str(BIN), "run", "--config", str(path)], work / f"{name}.log", env)
    port = int(config.split('listen = "127.0.0.1:', 1)[1].split('"', 1)[0])
    wait_until_up(port, "/readyz", proc, "the daemon")
    return proc, port


def read_timeline(path):
    """The simulator's `--timeline-file`: request id -> (arrival ns, [token chunk send ns])."""
    truth = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        truth[row["request_id"]] = (int(row["arrival_ns"]), [int(t) for t in row["token_sends_ns"]])
    return truth


def metric_sum(exposition, name, label=None):
    """The sum of a metric's samples, of those with `label` (e.g. 'target="x"') if given."""
    total = 0.0
    for line in exposition.decode().splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and (label is None or label in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def pct(values, p):
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def ms(seconds):
    return f"{seconds * 1000:.3f}"


def mib(kib):
    return f"{kib / 1024:.1f}"


def machine():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 2**20
    rev = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Linux {platform.release()}; "
            f"{rustc}; inferprobe {rev or 'unknown'}, {BIN.parent.name} build")
