#!/usr/bin/env python3
"""Makes a population as a Bulk Data export would deliver it: NDJSON, one file per resource type,
from the Synthea bundles in ../shared/synthea repeated with fresh ids.

Usage: scripts/population.py OUT_DIR [--megabytes N | --copies N] [--bad-lines K] [--active-share F] [--bundles]

Each copy of a bundle gets new ids for every resource (a copy number is appended), and every
reference (Bundle urn:uuid ones and relative ones) is rewritten to the copy's `Type/id`, as a
server's export has them. --megabytes stops once the files reach that size (default 1024).
--bad-lines puts K malformed lines into Observation.ndjson (for the tests of bad input), and
prints their line numbers. --active-share makes that share of the CarePlans active (their period
left open), the ones picked the same each run: Synthea's bundles have few active plans (15 of 55),
real populations more (140 of 325 in a 100-patient sample), and each active plan is stored.
--bundles writes each copy as a transaction Bundle of its own, as Synthea writes them (indented,
`urn:uuid` references, fresh uuids), instead of NDJSON: what `caregate import FOLDER` reads.
"""
import argparse
import glob
import json
import os
import sys
import uuid


def load_bundles(shared):
    bundles = []
    for path in sorted(glob.glob(os.path.join(shared, "synthea", "*.json"))):
        with open(path) as file:
            bundles.append(json.load(file))
    if not bundles:
        sys.exit(f"population.py: no Synthea bundles in {shared}/synthea")
    return bundles


def keyed(bundle):
    """The entries' resources, and each fullUrl's Type/id."""
    resources, urls = [], {}
    for entry in bundle.get("entry", []):
        resource = entry["resource"]
        key = f"{resource['resourceType']}/{resource['id']}"
        if "fullUrl" in entry:
            urls[entry["fullUrl"]] = key
        resources.append(resource)
    return resources, urls


def rewrite(value, urls, suffix):
    """Every reference in a resource, pointing at the copy's ids."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "reference" and isinstance(v, str):
                target = urls.get(v)
                if target is None and "/" in v and not v.startswith("#") and "?" not in v:
                    parts = v.split("/")
                    target = f"{parts[-2]}/{parts[-1]}"
                out[k] = f"{target}-{suffix}" if target else v
            else:
                out[k] = rewrite(v, urls, suffix)
        return out
    if isinstance(value, list):
        return [rewrite(v, urls, suffix) for v in value]
    return value


def activate(resource, share, counter):
    """Makes a CarePlan active (its period open) when the counter picks it; returns the counter."""
    if resource.get("resourceType") == "CarePlan":
        counter += 1
        if resource.get("status") != "active" and (counter * 7919) % 1000 < share * 1000:
            resource["status"] = "active"
            resource.get("period", {}).pop("end", None)
    return counter


def write_bundles(shared, out, copies, share):
    """Each Synthea bundle `copies` times, every id a fresh uuid, as indented transaction Bundles."""
    written, plans = 0, 0
    for copy in range(copies):
        for path in sorted(glob.glob(os.path.join(shared, "synthea", "*.json"))):
            with open(path) as file:
                text = file.read()
            bundle = json.loads(text)
            for entry in bundle.get("entry", []):
                old = entry["resource"]["id"]
                text = text.replace(old, str(uuid.uuid5(uuid.NAMESPACE_URL, f"{old}/{copy}")))
            bundle = json.loads(text)
            for entry in bundle.get("entry", []):
                plans = activate(entry["resource"], share, plans)
            name = os.path.basename(path)[:-len(".json")]
            target = os.path.join(out, f"{name}-c{copy}.json")
            with open(target, "w") as file:
                json.dump(bundle, file, indent=4, ensure_ascii=False)
            written += os.path.getsize(target)
    print(f"{copies} copies as Bundles: {written / 1_000_000:.0f} MB")


def main():
    parser = argparse.ArgumentParser(description="Synthea patients repeated with fresh ids, as Bulk Data NDJSON.")
    parser.add_argument("out")
    parser.add_argument("--megabytes", type=float, default=1024)
    parser.add_argument("--copies", type=int)
    parser.add_argument("--bad-lines", type=int, default=0)
    parser.add_argument("--active-share", type=float, default=0)
    parser.add_argument("--bundles", action="store_true")
    parser.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.bundles:
        return write_bundles(args.shared, args.out, args.copies or 5, args.active_share)
    bundles = [keyed(b) for b in load_bundles(args.shared)]
    files, written, copy = {}, 0, 0
    limit = args.megabytes * 1_000_000
    bad = []
    lines = {}
    plans = 0
    while (args.copies is None and written < limit) or (args.copies is not None and copy < args.copies):
        for resources, urls in bundles:
            suffix = f"c{copy}"
            for resource in resources:
                out = rewrite(resource, urls, suffix)
                out["id"] = f"{resource['id']}-{suffix}"
                kind = resource["resourceType"]
                plans = activate(out, args.active_share, plans)
                if kind not in files:
                    files[kind] = open(os.path.join(args.out, f"{kind}.ndjson"), "w")
                line = json.dumps(out, separators=(",", ":")) + "\n"
                files[kind].write(line)
                lines[kind] = lines.get(kind, 0) + 1
                written += len(line)
                if kind == "Observation" and len(bad) < args.bad_lines and lines[kind] % 97 == 0:
                    files[kind].write('{"resourceType":"Observation","id":\n')
                    lines[kind] += 1
                    bad.append(lines[kind])
        copy += 1
    for file in files.values():
        file.close()
    print(f"{copy} copies of {len(bundles)} patients: {written / 1_000_000:.0f} MB in {len(files)} files")
    if bad:
        print("bad lines in Observation.ndjson: " + " ".join(map(str, bad)))


if __name__ == "__main__":
    main()
