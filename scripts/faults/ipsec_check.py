#!/usr/bin/env python3
"""The checks and tables of scripts/ipsec.sh: every `rddp perf --verify` run
through the tunnel completed byte-exact, the outer link carried only ESP in UDP
(and IKE), and the control run without the tunnel was seen in clear."""
import argparse
import collections
import json
import subprocess
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def classify(protocols):
    p = protocols.split(":")
    if "arp" in p:
        return "arp"
    if "esp" in p:
        return "esp"
    if "isakmp" in p:
        return "ike"
    if "tcp" in p:
        return "tcp"
    if "sctp" in p:
        return "sctp"
    if "udp" in p:
        return "udp"
    return "other"


def capture(path):
    """Frames and octets (on the wire) of each class in a pcap, via tshark."""
    out = subprocess.run(
        ["tshark", "-n", "-r", path, "-T", "fields", "-e", "frame.protocols", "-e", "frame.len"],
        check=True, capture_output=True, text=True).stdout
    frames, octets = collections.Counter(), collections.Counter()
    for line in out.splitlines():
        if not line.strip():
            continue
        protos, _, ln = line.partition("\t")
        c = classify(protos)
        frames[c] += 1
        octets[c] += int(ln or 0)
    return frames, octets


def run_ok(r):
    why = []
    meas = [l for l in r["client"] if "iterations" in l]
    srv = r["server"][0] if r["server"] else {}
    if r["client_rc"] != 0 or not meas:
        why.append("client failed: " + " | ".join(r["client_err"][-1:]))
    elif meas[0]["iterations"] != r["iters"] or meas[0].get("corrupt_bytes") != 0:
        why.append(f"{meas[0]['iterations']} messages, {meas[0].get('corrupt_bytes')} corrupt octets")
    if srv.get("ok") is not True:
        why.append("server: " + str(srv.get("error")))
    elif srv.get("corrupt_bytes"):
        why.append(f"server found {srv['corrupt_bytes']} corrupt octets")
    return meas[0] if meas else None, why


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--outer", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--sa", default="?")
    ap.add_argument("--alg", default="?")
    ap.add_argument("--esn", default="?")
    ap.add_argument("--summary")
    a = ap.parse_args()
    recs = load(a.results)
    fails = []
    rows = []
    verified = 0
    print(f"ESP SA: {a.sa}; algorithms: {a.alg}")
    print(f"Extended Sequence Numbers: {a.esn}")
    print()
    print("| path | LLP | op | result | verified | corrupt octets | Gbit/s |")
    print("|---|---|---|---|---|---|---|")
    for r in recs:
        m, why = run_ok(r)
        tunnel = r["name"] == "tunnel"
        if tunnel:
            fails += [f"{r['transport']} {r['op']}: {w}" for w in why]
            if m:
                verified += m["bytes"]
        label = "inside the ESP tunnel (10.92.0.x)" if tunnel else "control: outer addresses, no tunnel"
        print(f"| {label} | {r['transport']} | {r['op']} | {'completed' if not why else 'FAILED'} | "
              f"{(m['bytes'] >> 20) if m else 0} MiB | {m.get('corrupt_bytes') if m else '-'} | "
              f"{m['gbit_per_s']:.2f} |" if m else f"| {label} | {r['transport']} | {r['op']} | FAILED | - | - | - |")
        rows.append({"path": r["name"], "transport": r["transport"], "op": r["op"],
                     "ok": not why, "bytes": m["bytes"] if m else 0,
                     "corrupt_bytes": m.get("corrupt_bytes") if m else None, "reasons": why})
    caps = {}
    print()
    print("| outer link capture (vB) | frames | ESP in UDP | IKE | TCP | SCTP | other UDP (SCTP over UDP) | other IP | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, path in (("during the tunnel runs", a.outer), ("during the control runs", a.control)):
        fr, oc = capture(path)
        clear = fr["tcp"] + fr["sctp"] + fr["udp"] + fr["other"]
        if name.startswith("during the tunnel"):
            ok = clear == 0 and fr["esp"] > 0 and oc["esp"] >= verified
            if clear:
                fails.append(f"{clear} frames in clear on the outer link during the tunnel runs")
            if oc["esp"] < verified:
                fails.append(f"ESP carried {oc['esp']} octets, less than the {verified} verified")
        else:
            ok = fr["tcp"] > 0 and fr["udp"] + fr["sctp"] > 0
            if not ok:
                fails.append("the control runs were not seen in clear: the capture check is blind")
        caps[name] = {"frames": dict(fr), "octets": dict(oc), "ok": ok}
        total = sum(fr.values())
        print(f"| {name} | {total} (ARP {fr['arp']}) | {fr['esp']} ({oc['esp'] >> 20} MiB) | {fr['ike']} | "
              f"{fr['tcp']} | {fr['sctp']} | {fr['udp']} | {fr['other']} | {'PASS' if ok else 'FAIL'} |")
    for f in fails:
        print("FAILED " + f)
    n_ok = sum(r["ok"] for r in rows if r["path"] == "tunnel") + sum(c["ok"] for c in caps.values())
    print(f"ipsec: {n_ok} passed, {len(fails)} failed")
    if a.summary:
        with open(a.summary, "w") as fh:
            json.dump({"all_pass": not fails, "esp_sa": a.sa, "algorithms": a.alg, "esn": a.esn,
                       "runs": rows, "captures": caps, "failures": fails}, fh, indent=1)
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
