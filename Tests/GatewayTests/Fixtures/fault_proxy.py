#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the push tests (standard library only).

Usage: fault_proxy.py UPSTREAM_PORT CONFIG.json COUNTS.json
Forwards every request to 127.0.0.1:UPSTREAM_PORT, except as CONFIG (read for each request) says:
  {"drop_after_forward": N}  the next N POST/PUT requests are forwarded, then the connection is
                             closed without an answer (the server committed; the client never knows)
  {"storm": N, "status": 503, "retry_after": "0"}  the next N requests are answered with that
                             status and Retry-After, without forwarding
  {"delay": S}               wait S seconds before forwarding
  {"drop_types": [T, ...]}   the CapabilityStatement (GET .../metadata) lists no such resource types
  {"no_update_create": [T, ...]}  ... and says these types' updates do not create (updateCreate false)
COUNTS records how many requests were forwarded, dropped and stormed, how many POSTs arrived (counted
on arrival, before any delay), how many wrote a single Observation (POST or PUT to .../Observation)
rather than a Bundle, and each read (a GET without a query) under "GET <path>".
The first line printed is the port it listens on.
"""
import http.client
import json
import signal
import sys
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
upstream_port = int(sys.argv[1])
config_path, counts_path = sys.argv[2], sys.argv[3]
lock = threading.Lock()
counts = {"forwarded": 0, "dropped": 0, "stormed": 0}
used = {"drop": 0, "storm": 0}


def save_counts():
    """Written whole, then renamed: a test reading the counts never sees half a file."""
    with open(counts_path + ".new", "w") as file:
        json.dump(counts, file)
    os.replace(counts_path + ".new", counts_path)


def patched_statement(data, config):
    """The server's CapabilityStatement as CONFIG would have it: types dropped, update-create denied."""
    drop, no_create = set(config.get("drop_types", [])), set(config.get("no_update_create", []))
    if not drop and not no_create:
        return data
    statement = json.loads(data)
    for rest in statement.get("rest", []):
        rest["resource"] = [r for r in rest.get("resource", []) if r.get("type") not in drop]
        for resource in rest["resource"]:
            if resource.get("type") in no_create:
                resource["updateCreate"] = False
    return json.dumps(statement).encode()


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with lock:
            config = json.load(open(config_path))
            if self.command == "POST":
                counts["posts_received"] = counts.get("posts_received", 0) + 1
            if self.command == "GET" and "?" not in self.path:
                counts["GET " + self.path] = counts.get("GET " + self.path, 0) + 1
            if self.command in ("POST", "PUT") and "/Observation" in self.path:
                counts["single_observation_posts"] = counts.get("single_observation_posts", 0) + 1
            storm = used["storm"] < config.get("storm", 0)
            if storm:
                used["storm"] += 1
                counts["stormed"] += 1
            drop = not storm and self.command in ("POST", "PUT") and used["drop"] < config.get("drop_after_forward", 0)
            if drop:
                used["drop"] += 1
            save_counts()
        if storm:
            payload = b'{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"transient","diagnostics":"busy"}]}'
            self.send_response(config.get("status", 503))
            self.send_header("Retry-After", config.get("retry_after", "0"))
            self.send_header("Content-Type", "application/fhir+json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        time.sleep(config.get("delay", 0))
        connection = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")}
        connection.request(self.command, self.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if self.command == "GET" and self.path.split("?")[0].endswith("/metadata"):
            data = patched_statement(data, config)
        with lock:
            counts["forwarded"] += 1
            if drop:
                counts["dropped"] += 1
            save_counts()
        if drop:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
print(server.server_address[1], flush=True)
server.serve_forever()
