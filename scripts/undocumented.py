#!/usr/bin/env python3
"""The public symbols a module declares without a documentation comment, from the symbol graphs
DocC's plugin extracted (.build/<triple>/extracted-symbols/<package folder>/<Module>/): one
warning per symbol with its file and line, then a count. Members the standard library supplies
(a raw-value enum's `hash(into:)`, a Sequence's `map`) are not the module's to document and are
left out: only symbols whose declaration is in the module's own sources count.

    scripts/undocumented.py Module
"""
import glob, json, os, sys

module = sys.argv[1]
folders = sorted(glob.glob(f".build/*/extracted-symbols/*/{module}"), key=os.path.getmtime)
if not folders:
    sys.exit(f"error: {module}: no extracted symbol graphs under .build (run the docs plugin first)")
sources = os.path.realpath(f"Sources/{module}") + "/"
found = set()
for graph in glob.glob(f"{folders[-1]}/{module}*.symbols.json"):
    for symbol in json.load(open(graph))["symbols"]:
        path = symbol.get("location", {}).get("uri", "").replace("file://", "")
        if symbol.get("accessLevel") not in ("public", "open") or "docComment" in symbol:
            continue
        if not os.path.realpath(path).startswith(sources):
            continue
        line = symbol["location"]["position"]["line"] + 1
        found.add((os.path.relpath(path), line, symbol["kind"]["displayName"].lower(), ".".join(symbol["pathComponents"])))
for path, line, kind, name in sorted(found):
    print(f"{path}:{line}: warning: {module}: {kind} {name} has no documentation comment")
print(f"{module}: {len(found)} public symbols without documentation")
