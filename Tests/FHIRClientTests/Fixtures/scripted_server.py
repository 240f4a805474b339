#!/usr/bin/env python3
"""A scripted HTTP server for the FHIR client's tests (standard library only).

Usage: scripted_server.py RULES.json LOG.jsonl
RULES is a list of {"path": "/fhir/...", "method": "GET", "responses": [...]} (read again for each
request, so a test can write links once it knows the port); each response is
{"status": 200, "headers": {...}, "body": <JSON or string>, "gzip": true, "drop": true}.
Responses for a path are used in order; the last one repeats. "drop" closes the connection
without answering. Every request is appended to LOG as a JSON line (method, path, headers, body).
The first line printed is the port it listens on (127.0.0.1, chosen by the system).
"""
import gzip
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A parent may have blocked signals in the thread that started us: take SIGTERM again.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
rules_path = sys.argv[1]
log_path = sys.argv[2]
lock = threading.Lock()
positions = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else None
        with lock:
            rules = json.load(open(rules_path))
            with open(log_path, "a") as log:
                log.write(json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}) + "\n")
            index = next((i for i, r in enumerate(rules) if r["path"] == self.path and r.get("method", self.command) == self.command), None)
            rule = rules[index] if index is not None else None
            if rule is None:
                response = {"status": 404, "body": {"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "not-found", "diagnostics": "no rule for " + self.path}]}}
            else:
                key = (self.command, self.path)
                i = positions.get(key, 0)
                response = rule["responses"][min(i, len(rule["responses"]) - 1)]
                positions[key] = i + 1
        if response.get("drop"):
            self.close_connection = True
            self.connection.shutdown(2)
            return
        payload = response.get("body")
        data = b"" if payload is None else (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        headers = dict(response.get("headers", {}))
        if response.get("gzip") and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        self.send_response(response.get("status", 200))
        if data:
            headers.setdefault("Content-Type", "application/fhir+json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
