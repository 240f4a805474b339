#!/usr/bin/env python3
"""A SMART Backend Services authorization server and a protected FHIR endpoint, for tests.

Usage: smart_auth_server.py CONFIG.json LOG.jsonl    (standard library and the openssl command)

CONFIG: {"clients": {"<client_id>": {"public_key": "pub.pem", "kid": "k1"}},
         "algorithms": ["RS384", "ES384"], "token_lifetime": 300, "uses_per_token": null}
The token endpoint (POST /auth/token) checks what a SMART server must: grant type, assertion
type, a JWT whose header names RS384 or ES384, typ JWT and the registered kid, whose signature
verifies (with `openssl dgst -sha384 -verify` against the client's registered public key; ES384's
raw r||s is converted to DER first), whose iss and sub are the client id, aud is this endpoint's
exact URL, exp is in the future and at most 5 minutes ahead, and whose jti was not seen before.
Errors are OAuth 2.0 JSON (invalid_client, invalid_request, ...).
/fhir/* answers only requests with a bearer token it issued that has neither expired nor been
used more than uses_per_token times (then 401). Every request is logged as a JSON line:
{"path", "kind": "token"|"fhir"|"config", "verdict", "claims", "header"}.
The first line printed is the port (127.0.0.1).
"""
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
config = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
lock = threading.Lock()
seen_jti = set()
tokens = {}  # token -> {"expires": t, "uses": n, "client": id, "scope": s}
port = None


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def der_integer(b):
    b = b.lstrip(b"\x00") or b"\x00"
    if b[0] & 0x80:
        b = b"\x00" + b
    return b"\x02" + der_length(len(b)) + b


def der_length(n):
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def verify(alg, public_key, signing_input, signature):
    if alg == "ES384":
        if len(signature) != 96:
            return False
        seq = der_integer(signature[:48]) + der_integer(signature[48:])
        signature = b"\x30" + der_length(len(seq)) + seq
    with tempfile.TemporaryDirectory() as d:
        data, sig = os.path.join(d, "in"), os.path.join(d, "sig")
        open(data, "wb").write(signing_input)
        open(sig, "wb").write(signature)
        result = subprocess.run(["openssl", "dgst", "-sha384", "-verify", public_key, "-signature", sig, data],
                                capture_output=True)
        return result.returncode == 0


def check_assertion(form, token_url):
    """Returns (claims, header, error) for a token request."""
    if form.get("grant_type") != "client_credentials":
        return None, None, ("unsupported_grant_type", "grant_type must be client_credentials")
    if form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
        return None, None, ("invalid_request", "wrong client_assertion_type")
    if not form.get("scope"):
        return None, None, ("invalid_scope", "no scope")
    parts = form.get("client_assertion", "").split(".")
    if len(parts) != 3:
        return None, None, ("invalid_request", "the assertion is not a compact JWS")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except Exception:
        return None, None, ("invalid_request", "the assertion does not decode")
    client = config["clients"].get(claims.get("iss"))
    if header.get("alg") not in config.get("algorithms", ["RS384", "ES384"]):
        return claims, header, ("invalid_client", "alg %s not accepted" % header.get("alg"))
    if header.get("typ") != "JWT":
        return claims, header, ("invalid_client", "typ must be JWT")
    if client is None:
        return claims, header, ("invalid_client", "unknown client")
    if client.get("kid") and header.get("kid") != client["kid"]:
        return claims, header, ("invalid_client", "unknown kid")
    if not verify(header["alg"], client["public_key"], (parts[0] + "." + parts[1]).encode(), signature):
        return claims, header, ("invalid_client", "the signature does not verify")
    now = time.time()
    if claims.get("sub") != claims.get("iss"):
        return claims, header, ("invalid_client", "sub must equal iss")
    if claims.get("aud") != token_url:
        return claims, header, ("invalid_client", "aud must be the token endpoint's URL")
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= now or exp > now + 300 + 5:
        return claims, header, ("invalid_client", "exp must be in the next 5 minutes")
    jti = claims.get("jti")
    if not jti or jti in seen_jti:
        return claims, header, ("invalid_client", "jti missing or replayed")
    seen_jti.add(jti)
    return claims, header, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, entry):
        with open(log_path, "a") as log:
            log.write(json.dumps(entry) + "\n")

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        base = "http://127.0.0.1:%d" % port
        with lock:
            if self.path == "/fhir/.well-known/smart-configuration":
                self.record({"path": self.path, "kind": "config"})
                return self.answer(200, {
                    "token_endpoint": base + "/auth/token",
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                    "token_endpoint_auth_signing_alg_values_supported": config.get("algorithms", ["RS384", "ES384"]),
                    "capabilities": ["client-confidential-asymmetric"],
                })
            if self.path == "/auth/token" and self.command == "POST":
                form = dict(urllib.parse.parse_qsl(body))
                claims, header, error = check_assertion(form, base + "/auth/token")
                self.record({"path": self.path, "kind": "token", "verdict": error[1] if error else "ok",
                             "claims": claims, "header": header, "scope": form.get("scope")})
                if error:
                    return self.answer(400 if error[0] != "invalid_client" else 401,
                                       {"error": error[0], "error_description": error[1]})
                token = secrets.token_urlsafe(24)
                lifetime = config.get("token_lifetime", 300)
                tokens[token] = {"expires": time.time() + lifetime, "uses": 0, "client": claims["iss"]}
                return self.answer(200, {"access_token": token, "token_type": "bearer", "expires_in": lifetime,
                                         "scope": form["scope"]})
            if self.path.startswith("/fhir/"):
                auth = self.headers.get("Authorization", "")
                token = auth[7:] if auth.startswith("Bearer ") else None
                grant = tokens.get(token)
                limit = config.get("uses_per_token")
                valid = grant is not None and grant["expires"] > time.time() and (limit is None or grant["uses"] < limit)
                self.record({"path": self.path, "kind": "fhir", "verdict": "ok" if valid else "401"})
                if not valid:
                    return self.answer(401, {"resourceType": "OperationOutcome", "issue": [
                        {"severity": "error", "code": "login", "diagnostics": "a valid bearer token is required"}]},
                        "application/fhir+json")
                grant["uses"] += 1
                resource_id = self.path.rsplit("/", 1)[-1]
                return self.answer(200, {"resourceType": "Patient", "id": resource_id}, "application/fhir+json")
            self.answer(404, {"error": "not_found"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port = server.server_address[1]
print(port, flush=True)
server.serve_forever()
