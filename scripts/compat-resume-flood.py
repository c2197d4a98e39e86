#!/usr/bin/env python3
"""Memory of resumable 2025 streams under a flood: SESSIONS sessions open their GET
stream and go away (the streams run on), then the demo's `burst` tool publishes
EVENTS tools/list_changed to each; prints the server's RSS growth per session.
Usage: scripts/compat-resume-flood.py BIN SESSIONS EVENTS (docs/compat-2025.md)."""
import json, socket, subprocess, sys, time, urllib.request
BIN, SESSIONS, EVENTS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
proc = subprocess.Popen([BIN, "serve", "--port", str(port)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
URL = f"http://127.0.0.1:{port}/mcp"
def rss():
    for l in open(f"/proc/{proc.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
def post(body, sid=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    if sid: h["Mcp-Session-Id"] = sid
    r = urllib.request.urlopen(urllib.request.Request(URL, data=json.dumps(body).encode(), headers=h), timeout=120)
    return r.headers.get("mcp-session-id"), r.read()
for _ in range(100):
    try: post({"jsonrpc":"2.0","id":0,"method":"ping"}); break
    except Exception: time.sleep(0.1)
sids = []
for i in range(SESSIONS):
    sid, _ = post({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}})
    sids.append(sid)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n".encode())
    c.recv(4096); c.close()   # away: the stream runs on without a client
time.sleep(1.0)
before = rss()
left = EVENTS
while left > 0:
    n = min(left, 10000)
    post({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"burst","arguments":{"count":n}}}, sids[0])
    left -= n
time.sleep(2.0)
after = rss()
print(f"{SESSIONS} sessions away, {EVENTS} events published to each: RSS {before} KiB -> {after} KiB, +{(after-before)/SESSIONS:.1f} KiB per session")
proc.terminate(); proc.wait()
