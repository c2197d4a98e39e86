#!/usr/bin/env python3
"""Churn soak for genmcp: memory and open streams under listen churn.

Starts `genmcp serve` (release build), holds N `subscriptions/listen` streams
open (default 1,000), drops M of them a second abruptly (TCP reset) and opens
replacements, calls the demo's `burst` tool (a small tools/list_changed burst
to every stream) every 5 s, and samples the server's resident memory (VmRSS
from /proc/PID/status) and its open streams. With --admin-port the server runs
its admin listener there and every sample also reads /metrics: the server's
own count of open streams, streams opened and closes by reason. Prints a table
and a summary; exits non-zero if a listen was not acknowledged, the server
died, or (with --admin-port) streams stayed open on the server after every
client had gone.

    cargo build --release --bin genmcp
    scripts/churn-soak.py --admin-port 18932 --duration 600     # 1,000 streams, 150/s churn
    scripts/churn-soak.py --streams 500 --churn 150 --duration 480
    scripts/churn-soak.py --lifecycles 1000000 --sample 30

Standard library only. See docs/operations.md and docs/security.md.
"""

import argparse
import json
import os
import random
import resource
import selectors
import socket
import struct
import subprocess
import sys
import time

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "churn-soak", "version": "1"},
}


def request_bytes(host, port, ident, method, params, name=None):
    body = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                       "params": dict(params, _meta=META)}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\n")
    if name:
        head += f"Mcp-Name: {name}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def scrape(host, port):
    """The admin listener's /metrics as {series: value}, or None."""
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        return None
    out = {}
    for line in body.decode(errors="replace").splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            try:
                out[series] = float(value)
            except ValueError:
                pass
    return out


def closes(m):
    """Closes by reason from a scrape, as 'reason=n' for the non-zero ones."""
    prefix = 'genmcp_streams_closed_total{reason="'
    return " ".join(f"{k[len(prefix):-2]}={int(v)}" for k, v in sorted(m.items())
                    if k.startswith(prefix) and v)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Stream:
    __slots__ = ("sock", "buf", "acked")

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.acked = False


class Attached:
    """A server this script did not start: sampled and churned, never stopped."""

    def __init__(self, pid):
        self.pid = pid

    def poll(self):
        return None if os.path.exists(f"/proc/{self.pid}") else 0

    def terminate(self):
        pass

    def wait(self, timeout=None):
        return None

    def kill(self):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/genmcp")
    ap.add_argument("--port", type=int, default=18931)
    ap.add_argument("--streams", type=int, default=1000,
                    help="listens held open (N, default 1000)")
    ap.add_argument("--churn", type=int, default=150, help="listens replaced per second (M)")
    ap.add_argument("--duration", type=float, default=180, help="seconds (default 180)")
    ap.add_argument("--lifecycles", type=int, default=0,
                    help="stop after this many finished listens instead")
    ap.add_argument("--sample", type=float, default=15, help="seconds between RSS samples")
    ap.add_argument("--burst", type=int, default=5, help="events per burst (every 5 s)")
    ap.add_argument("--admin-port", type=int, default=0,
                    help="run the server with --admin 127.0.0.1:PORT (with --attach: the "
                         "running server's admin port) and sample its /metrics")
    ap.add_argument("--attach", type=int, metavar="PID", default=0,
                    help="churn an already running server (process PID, listening on "
                         "--port, e.g. under heaptrack) instead of starting one")
    args = ap.parse_args()

    host = "127.0.0.1"
    # Every stream is a socket here and one on the server (which inherits this).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.streams * 2 + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "genmcp=warn"))
    if args.attach:
        server = Attached(args.attach)
    else:
        cmd = [args.binary, "serve", "--host", host, "--port", str(args.port)]
        if args.admin_port:
            cmd += ["--admin", f"{host}:{args.admin_port}"]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(100):
            try:
                socket.create_connection((host, args.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        sel = selectors.DefaultSelector()
        streams = {}
        next_id = [0]
        unacked_failures = [0]
        server_closed = [0]

        def open_listen():
            next_id[0] += 1
            s = socket.create_connection((host, args.port))
            s.setblocking(False)
            s.sendall(request_bytes(host, args.port, f"l{next_id[0]}", "subscriptions/listen",
                                    {"notifications": {"toolsListChanged": True}}))
            st = Stream(s)
            streams[s.fileno()] = st
            sel.register(s, selectors.EVENT_READ, st)

        def drop(st):
            sel.unregister(st.sock)
            streams.pop(st.sock.fileno(), None)
            if not st.acked:
                unacked_failures[0] += 1
            # Abrupt: RST instead of FIN.
            st.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            st.sock.close()

        def burst(n):
            s = socket.create_connection((host, args.port), timeout=10)
            s.sendall(request_bytes(host, args.port, 1, "tools/call",
                                    {"name": "burst", "arguments": {"count": n}}, name="burst"))
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            return data.split(b" ", 2)[1] if data else b"?"

        for _ in range(args.streams):
            open_listen()
        start = time.monotonic()
        next_sample = start
        next_burst = start + 5
        finished = 0
        rows = []
        admin = args.admin_port

        def sample(now):
            rss = rss_kib(server.pid)
            m = scrape(host, admin) if admin else None
            served = int(m["genmcp_streams_open"]) if m else None
            rows.append((now - start, rss, finished, served))
            line = f"{now - start:7.0f} {rss:>10} {len(streams):>6} {finished:>11}"
            if admin:
                line += (f" {served if served is not None else '?':>7} "
                         f"{int(m['genmcp_streams_opened_total']) if m else '?':>9}  "
                         f"{closes(m) if m else '(no /metrics)'}")
            print(line, flush=True)
            return rss

        header = f"{'t (s)':>7} {'RSS (KiB)':>10} {'open':>6} {'lifecycles':>11}"
        if admin:
            header += f" {'served':>7} {'opened':>9}  closes (server)"
        print(header)
        tick = 0.05
        churn_due = 0.0
        last = start
        while True:
            now = time.monotonic()
            if args.lifecycles and finished >= args.lifecycles:
                break
            if not args.lifecycles and now - start >= args.duration:
                break
            if server.poll() is not None:
                print("server exited", file=sys.stderr)
                return 2
            # Read whatever arrived (acks, notifications, keep-alives).
            for key, _ in sel.select(timeout=tick):
                st = key.data
                try:
                    chunk = st.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    # The server ended the stream (it should not, in this soak).
                    server_closed[0] += 1
                    drop(st)
                    finished += 1
                    open_listen()
                    continue
                if not st.acked:
                    st.buf += chunk
                    if b"notifications/subscriptions/acknowledged" in st.buf:
                        st.acked = True
                        st.buf = b""
            # Churn: replace M per second among the acknowledged streams.
            churn_due += args.churn * (now - last)
            last = now
            k = int(churn_due)
            churn_due -= k
            acked = [st for st in streams.values() if st.acked]
            for st in random.sample(acked, min(k, len(acked))):
                drop(st)
                finished += 1
                open_listen()
            if now >= next_burst:
                status = burst(args.burst)
                if status != b"200":
                    print(f"burst answered {status!r}", file=sys.stderr)
                next_burst += 5
            if now >= next_sample:
                sample(now)
                next_sample += args.sample
        rss = sample(time.monotonic())
        first = rows[1][1] if len(rows) > 1 else rows[0][1]
        print(f"\n{finished} listen lifecycles in {rows[-1][0]:.0f} s; "
              f"RSS {rows[0][1]} KiB at start, {first} KiB at the first sample after it, "
              f"{rss} KiB at the end ({rss - first:+d} KiB); "
              f"{unacked_failures[0]} listens dropped before their acknowledgement, "
              f"{server_closed[0]} ended by the server")
        # The figure: growth over the run's second half (from the
        # first sample at or after the midpoint to the last one).
        mid = rows[-1][0] / 2
        half = next((r for r in rows if r[0] >= mid), rows[-1])
        print(f"second half: RSS {half[1]} KiB at {half[0]:.0f} s, {rss} KiB at "
              f"{rows[-1][0]:.0f} s: {rss - half[1]:+d} KiB ({(rss - half[1]) / 1024:+.2f} MiB)")
        served = [r[3] for r in rows if r[3] is not None]
        if served:
            print(f"open streams on the server (from /metrics): min {min(served)}, "
                  f"max {max(served)} over {len(served)} samples; "
                  f"{len(streams)} held by this client at the end")
        # Drop the rest the same way, then look at what the server keeps with
        # no stream open.
        for st in list(streams.values()):
            drop(st)
        time.sleep(2)
        print(f"RSS with every stream dropped (2 s later): {rss_kib(server.pid)} KiB")
        if admin:
            # A dropped client is noticed at the next write: a burst writes to
            # every stream still registered, and keep-alives follow.
            burst(1)
            left = None
            for _ in range(60):
                m = scrape(host, admin)
                left = int(m["genmcp_streams_open"]) if m else None
                if left == 0:
                    break
                time.sleep(0.5)
            print(f"open streams on the server after every client had gone: {left}")
            if left != 0:
                return 3
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
