"""Write the go.mod of a work module that builds a dependency's command the way the dependency builds it.

Reads `go mod edit -json` of the dependency's go.mod on stdin:
    python3 workmod.py MODULE VERSION [STAGING_VERSION] < deps.json > go.mod
The work module requires MODULE@VERSION, copies its go directive, godebug lines and replace lines;
replaces pointing at a local folder (Kubernetes' ./staging/src/k8s.io/*) are mapped to the published
module of the same path at STAGING_VERSION.
"""
import json
import sys


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    path, version = sys.argv[1], sys.argv[2]
    staging = sys.argv[3] if len(sys.argv) == 4 else ""
    mod = json.load(sys.stdin)
    out = ["module gateway-sizer.local/build", "", f"go {mod['Go']}", ""]
    out += [f"godebug {d['Key']}={d['Value']}" for d in mod.get("GoDebug") or []]
    out += ["", f"require {path} {version}", ""]
    for r in mod.get("Replace") or []:
        old, new = r["Old"], r["New"]
        lhs = old["Path"] + (" " + old["Version"] if old.get("Version") else "")
        if new.get("Version"):
            out.append(f"replace {lhs} => {new['Path']} {new['Version']}")
        elif staging:
            out.append(f"replace {lhs} => {old['Path']} {staging}")
        else:
            print(f"error: {path}@{version} replaces {lhs} with a local folder; cannot build it as a dependency",
                  file=sys.stderr)
            return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
