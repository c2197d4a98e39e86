#!/usr/bin/env python3
"""An OTLP/HTTP sink for benchmarks: answers every POST with 200 and an empty
body, counts the requests and bytes, and prints the counts when stopped.

    python3 scripts/otlp-sink.py PORT &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT genmcp serve ...
"""
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        counts["requests"] += 1
        counts["bytes"] += length
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Sink)

    def stop(*_):
        print(f"otlp-sink: {counts['requests']} requests, {counts['bytes']} bytes", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()
