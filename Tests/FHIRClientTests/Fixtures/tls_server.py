#!/usr/bin/env python3
"""An HTTPS server for the client's TLS tests (standard library only).

Usage: tls_server.py CERT.pem KEY.pem [CLIENT_CA.pem]
Answers every GET with a Patient whose id is the last path segment. With CLIENT_CA, a client
certificate signed by that CA is required (mutual TLS). The first line printed is the port.
"""
import json
import signal
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        peer = self.connection.getpeercert()
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        body = json.dumps({"resourceType": "Patient", "id": self.path.rsplit("/", 1)[-1],
                           "name": [{"text": subject.get("commonName", "anonymous")}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/fhir+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.minimum_version = ssl.TLSVersion.TLSv1_2
context.load_cert_chain(sys.argv[1], sys.argv[2])
if len(sys.argv) > 3:
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(sys.argv[3])
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
