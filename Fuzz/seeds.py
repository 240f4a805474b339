#!/usr/bin/env python3
"""Builds the fuzzers' seed corpora in Fuzz/.build/seeds/<harness>/ from the project's own files
(FHIRSamples/, Mappings/) and, when present, ../shared (the R4 examples, the FHIRPath suites).
Harnesses that pick a mode with their first byte get seeds with that byte in front."""
import glob, hashlib, json, os, re, sys, html

fuzz = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(fuzz)
shared = os.path.join(os.path.dirname(repo), "shared")
out = os.path.join(fuzz, ".build", "seeds")

def put(harness, data, prefix=None):
    if prefix is not None:
        data = bytes([prefix]) + data
    if len(data) > 256 * 1024:
        return
    folder = os.path.join(out, harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)

def files(*patterns):
    for pattern in patterns:
        yield from sorted(glob.glob(pattern, recursive=True))

def read(path):
    with open(path, "rb") as f:
        return f.read()

json_files = list(files(f"{repo}/FHIRSamples/json/*.json", f"{repo}/FHIRSamples/bundle/*.json", f"{shared}/fhir-r4/examples/json/*.json"))
xml_files = list(files(f"{repo}/FHIRSamples/xml/*.xml", f"{repo}/FHIRSamples/bundle/*.xml", f"{shared}/fhir-r4/examples/xml/*.xml"))
for path in json_files:
    put("fhir-json", read(path))
for path in xml_files:
    put("fhir-xml", read(path))

# Streams: 0 NDJSON, 1 a JSON Bundle, 2 an XML Bundle.
for path in files(f"{repo}/FHIRSamples/ndjson/*.ndjson"):
    put("fhir-stream", read(path), 0)
for path in json_files:
    if '"Bundle"' in read(path)[:200].decode("utf-8", "replace"):
        put("fhir-stream", read(path), 1)
for path in xml_files:
    if b"<Bundle" in read(path)[:400]:
        put("fhir-stream", read(path), 2)

# FHIRPath: the official R4 suite's and SQL-on-FHIR's expressions, and the shipped mappings'.
for path in files(f"{shared}/fhirpath/r4/tests-fhir-r4.xml"):
    for m in re.finditer(r"<expression[^>]*>(.*?)</expression>", read(path).decode("utf-8"), re.S):
        put("fhirpath", html.unescape(m.group(1)).encode())
def values(node, keys):
    """Every value under one of `keys` in a JSON tree (not looking inside those values)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in keys:
                yield v
            else:
                yield from values(v, keys)
    elif isinstance(node, list):
        for v in node:
            yield from values(v, keys)
for path in files(f"{shared}/fhirpath/sql-on-fhir/*.json"):
    for e in values(json.loads(read(path)), {"expression"}):
        if isinstance(e, str):
            put("fhirpath", e.encode())
for path in files(f"{repo}/Mappings/*.yaml"):
    for m in re.finditer(r"^\s*(?:-\s*)?[a-zA-Z]+:\s*(\S.*?\(.*)$", read(path).decode("utf-8"), re.M):
        put("fhirpath", m.group(1).strip("'\"").encode())

# Mapping files: the shipped ones and their shared tables.
for path in files(f"{repo}/Mappings/*.yaml", f"{repo}/Mappings/shared/*.yaml"):
    put("mapping", read(path))

# Timings: every Timing object in the samples and examples, under each time zone pick.
for n, path in enumerate(json_files):
    try:
        document = json.loads(read(path))
    except ValueError:
        continue
    for timing in values(document, {"timing", "scheduledTiming", "occurrenceTiming", "effectiveTiming", "timingTiming"}):
        if isinstance(timing, dict):
            put("timing", json.dumps(timing).encode(), n % 6)

for harness in sorted(os.listdir(out)) if os.path.isdir(out) else []:
    print(f"seeds: {harness}: {len(os.listdir(os.path.join(out, harness)))}", file=sys.stderr)
