#!/usr/bin/env python3
"""One run of scripts/faults.sh as one JSON line: what the client, the server and
the impairing bridge reported (their own JSON), exit codes, and the last lines
of their stderr."""
import argparse
import json
import os
import time


def json_lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def tail(path, n=5):
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip() for l in f.readlines()[-n:]]
    except OSError:
        return []


ap = argparse.ArgumentParser()
for k in ("dir", "name", "kind", "transport", "op", "crc", "impair"):
    ap.add_argument("--" + k, required=True)
for k in ("iters", "size", "client-rc", "server-rc"):
    ap.add_argument("--" + k, type=int, required=True)
ap.add_argument("--t0", type=float, required=True)
a = ap.parse_args()
try:
    with open(os.path.join(a.dir, "bridge.json")) as f:
        bridge = json.load(f)
except (OSError, ValueError):
    bridge = None
rec = {
    "name": a.name, "kind": a.kind, "transport": a.transport, "op": a.op, "crc": a.crc,
    "impair": a.impair, "iters": a.iters, "size": a.size,
    "seconds": round(time.time() - a.t0, 2),
    "client_rc": a.client_rc, "server_rc": a.server_rc,
    "client": json_lines(os.path.join(a.dir, "client.out")),
    "server": json_lines(os.path.join(a.dir, "server.out")),
    "bridge": bridge,
    "client_err": tail(os.path.join(a.dir, "client.err")),
    "server_err": tail(os.path.join(a.dir, "server.err")),
    "bridge_err": tail(os.path.join(a.dir, "bridge.err")),
}
print(json.dumps(rec))
