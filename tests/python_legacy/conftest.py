"""Fixtures for the 2025-era Python-SDK peer test (mcp 1.26): the same as
tests/python/conftest.py (a genmcp server process per test), loaded from there."""

import importlib.util
import pathlib
import sys

_path = pathlib.Path(__file__).resolve().parent.parent / "python" / "conftest.py"
_spec = importlib.util.spec_from_file_location("genmcp_peer_fixtures", _path)
_fixtures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _fixtures  # dataclasses look their module up there
_spec.loader.exec_module(_fixtures)
globals().update({k: v for k, v in vars(_fixtures).items() if not k.startswith("__")})
