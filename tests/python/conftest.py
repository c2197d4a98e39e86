"""Fixtures for the Python-SDK peer test: a genmcp server process per test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 20.0


def _binary() -> Path:
    raw = os.environ.get("GENMCP_BIN", "target/debug/genmcp")
    path = Path(raw)
    if not path.is_absolute():
        path = ROOT / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.exit(
            f"genmcp binary not found: {path} (run `cargo build --bin genmcp` or set GENMCP_BIN)",
            returncode=2,
        )
    return path


def _die_with_parent() -> None:
    """Linux: SIGTERM the server if the pytest process dies (e.g. a hard timeout)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class GenmcpServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _start(binary: Path, log_path: Path, extra_args: tuple[str, ...] = ()) -> GenmcpServer:
    for _attempt in range(3):
        port = _free_port()
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [str(binary), "serve", "--host", "127.0.0.1", "--port", str(port), "--keep-alive", "1", *extra_args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "genmcp=info"), "NO_COLOR": "1"},
        )
        log.close()
        server = GenmcpServer(proc, port, log_path)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break  # exited early (e.g. the port was taken in the meantime): retry on a new port
            if _accepts(port):
                return server
            time.sleep(0.05)
        _stop(proc)
    raise RuntimeError(f"genmcp did not become ready on 127.0.0.1; log:\n{log_path.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def genmcp(tmp_path: Path) -> Iterator[GenmcpServer]:
    """A fresh genmcp notes demo on a free loopback port; always stopped afterwards."""
    server = _start(_binary(), tmp_path / "genmcp.log")
    try:
        yield server
    finally:
        _stop(server.proc)
        # Shown by pytest only when the test failed.
        print(f"--- genmcp log (exit {server.proc.returncode}) ---\n{server.log()}")
