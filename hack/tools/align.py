#!/usr/bin/env python3
"""Aligns the versions of the modules that several Go modules share.

hack/tools/sync.sh runs it. Each module directory given (the tools that make
test builds, Tend's own module, hack/cluster's) requires some modules that the
others require too: golang.org/x/*, gRPC, protobuf, the Kubernetes libraries.
Go's build cache serves a compiled package to a second build only when that
package and everything it imports are the same source, so two builds that
differ in one low module (golang.org/x/sys, say) compile everything above it
twice. Raising each shared module to the highest version any of them requires
lets the tool builds and Tend's test builds share their packages; a cold
`make test` compiles about half as much.

    align.py --exclude M,M... DIR...   raise, tidy, repeat until nothing moves
    align.py --exclude M,M... --check DIR...
                                       fail if two DIRs require one module at
                                       different versions (offline)

A module that --exclude names (the versions that hack/versions.env pins) is
left alone; one that a DIR replaces with a version of itself counts towards
the highest version but is not changed.
"""

import argparse
import json
import re
import subprocess
import sys

SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def version_key(v):
    """A sort key that orders versions as semver (and so Go) does."""
    m = SEMVER.match(v)
    if not m:
        raise ValueError(f"not a semantic version: {v}")
    core = tuple(int(x) for x in m.group(1, 2, 3))
    pre = m.group(4)
    if pre is None:
        return core + (1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return core + (0, ids)


def requirements(d, exclude):
    """What d's go.mod requires, less the excluded modules, as two {path:
    version} maps: the versions that align may raise, and those of the
    modules that d replaces with a version of themselves (Kubernetes' staging
    modules, etcd's siblings), which count towards the highest but stay."""
    mod = json.loads(subprocess.run(["go", "mod", "edit", "-json"], cwd=d, check=True,
                                    capture_output=True, text=True).stdout)
    replaced, fixed = set(), {}
    for r in mod.get("Replace") or []:
        replaced.add(r["Old"]["Path"])
        if r["New"]["Path"] == r["Old"]["Path"] and r["New"].get("Version") and r["Old"]["Path"] not in exclude:
            fixed[r["Old"]["Path"]] = r["New"]["Version"]
    free = {r["Path"]: r["Version"] for r in mod.get("Require") or []
            if r["Path"] not in replaced and r["Path"] not in exclude}
    return free, fixed


def highest(reqs):
    """{path: (version, [dirs that may raise it])} for every module that two or
    more dirs require."""
    seen = {}
    for d, (free, fixed) in reqs.items():
        for p, v in free.items():
            seen.setdefault(p, []).append((v, d))
        for p, v in fixed.items():
            seen.setdefault(p, []).append((v, None))
    return {p: (max((v for v, _ in vs), key=version_key), [d for _, d in vs if d])
            for p, vs in seen.items() if len(vs) > 1}


def check(dirs, exclude):
    reqs = {d: requirements(d, exclude) for d in dirs}
    bad = 0
    for p, (top, ds) in sorted(highest(reqs).items()):
        lower = [f"{d} ({reqs[d][0][p]})" for d in ds if reqs[d][0][p] != top]
        if lower:
            print(f"{p} is required at {top} and lower in: {', '.join(lower)}; "
                  "run hack/tools/sync.sh", file=sys.stderr)
            bad = 1
    return bad


def align(dirs, exclude):
    # Raising one module can raise others (its own requirements), so repeat
    # until a round changes nothing.
    for _ in range(10):
        reqs = {d: requirements(d, exclude) for d in dirs}
        tops = highest(reqs)
        moved = False
        for d in dirs:
            edits = [f"-require={p}@{top}" for p, (top, ds) in tops.items()
                     if d in ds and reqs[d][0][p] != top]
            if edits:
                subprocess.run(["go", "mod", "edit", *edits], cwd=d, check=True)
                subprocess.run(["go", "mod", "tidy"], cwd=d, check=True)
                moved = True
        if not moved:
            return check(dirs, exclude)
    print("align: the versions still moved after 10 rounds", file=sys.stderr)
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exclude", default="", help="modules to leave alone, comma-separated")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    exclude = set(filter(None, args.exclude.split(",")))
    sys.exit(check(args.dirs, exclude) if args.check else align(args.dirs, exclude))


if __name__ == "__main__":
    main()
