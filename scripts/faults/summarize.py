#!/usr/bin/env python3
"""The checks and the table of scripts/faults.sh, from its results.jsonl.

  summarize.py --progress results.jsonl     one line about the last run (stderr)
  summarize.py --table results.jsonl [--summary summary.json]
                                            the table; exit 1 if a check failed

Every run is checked on its own (check_run); rows of the table add up the runs
of one case, transport, operation and CRC setting.
"""
import argparse
import json
import re
import sys

FPDU_RE = re.compile(r"\(FPDU (\d+) after setup\)")
IP_A = "10.91.0.1"


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def measurement(lines):
    return [l for l in lines if "size" in l and "iterations" in l]


def failure(lines):
    return next((l for l in lines if "error" in l), None)


def data_dir(rec):
    """The bridge's MPA record of the direction the data flows in."""
    b = rec.get("bridge") or {}
    src = "10.91.0.2" if rec["op"] == "read" else IP_A
    dirs = [d for d in b.get("mpa", []) if d["flow"].startswith(src + ":")]
    return dirs[-1] if dirs else None


def back_dir(rec):
    b = rec.get("bridge") or {}
    src = IP_A if rec["op"] == "read" else "10.91.0.2"
    dirs = [d for d in b.get("mpa", []) if d["flow"].startswith(src + ":")]
    return dirs[-1] if dirs else None


def check_run(rec):
    """Facts of one run and the reasons it failed its checks (empty: passed)."""
    why = []
    b = rec.get("bridge") or {}
    f = {
        "lost": b.get("lost", 0), "dup": b.get("dup", 0),
        "reordered": b.get("reordered", 0), "corrupted": b.get("corrupted", 0),
        "octets_verified": 0, "corrupt_delivered": 0, "refused": 0, "reached": 0,
        "index_match": 0, "wire_terminate": None, "completed": False, "gbit_per_s": None,
        "ending": None, "payload_hits": 0, "after_refusal": 0,
    }
    if not b:
        why.append("no statistics from the bridge")
    imp = rec["impair"]
    for flag, key in (("--loss", "lost"), ("--dup", "dup"), ("--reorder", "reordered"),
                      ("--corrupt ", "corrupted")):
        if flag in imp + " " and f[key] == 0:
            why.append(f"the bridge {key} no frame")
    cl, sv = rec["client"], rec["server"]
    meas = measurement(cl)
    srv = sv[0] if sv else {}
    cfail, sfail = failure(cl), (srv if srv.get("ok") is False else None)
    f["completed"] = rec["client_rc"] == 0 and bool(meas) and srv.get("ok") is True
    if meas:
        m = meas[0]
        f["gbit_per_s"] = m.get("gbit_per_s")
        f["octets_verified"] = m["iterations"] * m["size"] if m.get("corrupt_bytes") is not None else 0
        f["corrupt_delivered"] += m.get("corrupt_bytes", 0)
    elif rec["op"] == "send" and srv:
        # A failed Send run: the server verified every message it was given.
        f["octets_verified"] = srv.get("messages", 0) * rec["size"]
        f["corrupt_delivered"] += srv.get("corrupt_bytes", 0)
    if rec["op"] == "send" and meas and srv:
        # The client's figure already includes the server's count; cross-check.
        if srv.get("corrupt_bytes", 0) != meas[0].get("corrupt_bytes", 0):
            why.append("client and server disagree on corrupt octets")
    # The receiver of the data first (it refuses a corrupted FPDU), then the sender.
    ends = [x for x in ((cfail, sfail) if rec["op"] == "read" else (sfail, cfail)) if x]
    if ends:
        e = ends[0]
        f["ending"] = (("sent " + e["terminate_sent"]) if "terminate_sent" in e else
                       ("received " + e["terminate_received"]) if "terminate_received" in e else
                       e.get("closed", "error"))
    kind = rec["kind"]
    if kind == "clean":
        if not f["completed"]:
            why.append("did not complete: " + " | ".join(rec["client_err"][-1:] + rec["server_err"][-1:]))
        elif meas[0]["iterations"] != rec["iters"]:
            why.append(f"{meas[0]['iterations']} of {rec['iters']} messages")
        if f["corrupt_delivered"] or srv.get("corrupt_bytes", 0):
            why.append(f"{f['corrupt_delivered']} corrupt octets delivered")
        if f["completed"] and srv.get("messages") != rec["iters"]:
            why.append(f"the server counted {srv.get('messages')} messages")
        return f, why
    # Corruption over MPA: match the receiver's refusal against the bridge.
    d, back = data_dir(rec), back_dir(rec)
    if d is None or d.get("untracked"):
        why.append("the bridge did not follow the MPA stream: %s" % (d and d.get("untracked")))
        return f, why
    recv = srv if rec["op"] != "read" else (cfail or {})
    sender = (cfail or {}) if rec["op"] != "read" else srv
    k = d["first_corrupted_fpdu"]
    f["reached"] = 0 if k is None else 1
    f["wire_terminate"] = back["terminate"]["code"] if back and back.get("terminate") else None
    hits = [e for e in d["corrupted"] if e["first_copy"] and e["fpdu"] is not None]
    if kind == "crc-on":
        f["refused"] = int(recv.get("crc_refused", 0))
        m = FPDU_RE.search(recv.get("terminate_detail", ""))
        got = int(m.group(1)) if m else None
        # Corrupted frames that never reached MPA: behind the refused FPDU (the
        # connection was over), or copies of octets already delivered.
        f["after_refusal"] = sum(1 for e in d["corrupted"]
                                 if not (e["first_copy"] and e["fpdu"] == k))
        if f["refused"] != f["reached"]:
            why.append(f"refused {f['refused']} FPDU(s), {f['reached']} corrupted one(s) reached MPA")
        if k is not None:
            if got == k:
                f["index_match"] = 1
            else:
                why.append(f"refused FPDU {got}, the bridge corrupted FPDU {k} first")
            if f["wire_terminate"] != "2/0/0x02":
                why.append(f"Terminate on the wire: {f['wire_terminate']}")
            if sender.get("terminate_received") != "2/0/0x02":
                why.append("the sender did not report Terminate 2/0/0x02 received")
        elif not f["completed"]:
            why.append("failed although no corrupted octet reached MPA")
        if f["corrupt_delivered"]:
            why.append(f"{f['corrupt_delivered']} corrupt octets delivered")
    else:  # crc-off: show the damage; check that it is what the bridge did
        # Without the CRC nothing stops at a corrupted FPDU: every first copy
        # the bridge corrupted reached MPA (until a Terminate, if one came).
        refused_at = None
        m = FPDU_RE.search(recv.get("terminate_detail", ""))
        if m:
            refused_at = int(m.group(1))
        reached = [e for e in hits if refused_at is None or e["fpdu"] <= refused_at]
        f["reached"] = len(reached)
        f["payload_hits"] = sum(1 for e in reached if e["part"] == "payload")
        if rec["op"] == "send" and f["completed"] and f["corrupt_delivered"] != f["payload_hits"]:
            why.append(f"verify found {f['corrupt_delivered']} corrupt octets, "
                       f"the bridge flipped {f['payload_hits']} payload octets")
    return f, why


def rows(recs):
    out = {}
    for r in recs:
        key = (r["name"], r["kind"], r["transport"], r["op"], r["crc"])
        f, why = check_run(r)
        row = out.setdefault(key, {
            "case": r["name"], "kind": r["kind"], "transport": r["transport"], "op": r["op"],
            "crc": r["crc"], "runs": 0, "completed": 0, "lost": 0, "dup": 0, "reordered": 0,
            "corrupted": 0, "octets_verified": 0, "corrupt_delivered": 0, "refused": 0,
            "reached": 0, "index_match": 0, "payload_hits": 0, "after_refusal": 0,
            "wire_terminates": {},
            "endings": {}, "gbit_per_s": [], "reasons": []})
        row["runs"] += 1
        row["completed"] += int(f["completed"])
        for k in ("lost", "dup", "reordered", "corrupted", "octets_verified",
                  "corrupt_delivered", "refused", "reached", "index_match", "payload_hits",
                  "after_refusal"):
            row[k] += f[k]
        if f["wire_terminate"]:
            row["wire_terminates"][f["wire_terminate"]] = row["wire_terminates"].get(f["wire_terminate"], 0) + 1
        if f["ending"]:
            row["endings"][f["ending"]] = row["endings"].get(f["ending"], 0) + 1
        if f["gbit_per_s"] is not None:
            row["gbit_per_s"].append(f["gbit_per_s"])
        row["reasons"] += [f"run {row['runs']}: {w}" for w in why]
    for row in out.values():
        row["pass"] = not row["reasons"]
    return list(out.values())


def mib(n):
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n} B"


def fmt_row(r):
    imp = []
    for k, label in (("lost", "lost"), ("dup", "dup"), ("reordered", "reord"), ("corrupted", "corr")):
        if r[k]:
            imp.append(f"{r[k]} {label}")
    if r["kind"] == "clean":
        result = f"{r['completed']}/{r['runs']} completed"
        crc = "-"
    elif r["kind"] == "crc-on":
        ends = ", ".join(f"{n}x {e}" for e, n in sorted(r["endings"].items())) or "completed"
        result = ends
        crc = (f"{r['refused']} refused / {r['reached']} reached "
               f"({r['index_match']} same FPDU)")
        if r["after_refusal"]:
            crc += f"; {r['after_refusal']} more corrupted frame(s) never reached MPA"
    else:
        ends = ", ".join(f"{n}x {e}" for e, n in sorted(r["endings"].items()))
        result = f"{r['completed']}/{r['runs']} completed" + (f"; {ends}" if ends else "")
        crc = f"off: {r['reached']} reached, {r['payload_hits']} in payload"
    wire = ", ".join(f"{n}x {c}" for c, n in sorted(r["wire_terminates"].items())) or "-"
    g = sorted(r["gbit_per_s"])
    thr = f"{g[len(g) // 2]:.2f}" if g else "-"
    return [r["case"], r["transport"], r["op"], r["crc"], str(r["runs"]), ", ".join(imp) or "-",
            result, mib(r["octets_verified"]), str(r["corrupt_delivered"]), crc, wire, thr,
            "PASS" if r["pass"] else ("shown" if r["kind"] == "crc-off" and r["op"] != "send" else "FAIL")]


HEAD = ["impairment", "LLP", "op", "CRC", "runs", "frames impaired (bridge)", "result",
        "verified", "corrupt octets delivered", "MPA CRC: refused / corrupted FPDUs that reached MPA",
        "Terminate on the wire", "Gbit/s (median)", "check"]


def table(rs):
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for r in rs:
        lines.append("| " + " | ".join(fmt_row(r)) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--summary")
    a = ap.parse_args()
    recs = load(a.results)
    if a.progress:
        r = recs[-1]
        f, why = check_run(r)
        print(f"faults: {r['name']:<26} {r['transport']:<4} {r['op']:<5} crc {r['crc']:<3} "
              f"{r['seconds']:>6.1f} s  {'ok' if not why else 'FAILED: ' + '; '.join(why)}",
              file=sys.stderr)
        return 0
    rs = rows(recs)
    # crc-off rows other than Send only show what verify sees; they are not checks.
    for r in rs:
        if r["kind"] == "crc-off" and r["op"] != "send":
            r["pass"] = True
    ok = all(r["pass"] for r in rs)
    print(table(rs))
    for r in rs:
        for w in r["reasons"]:
            print(f"FAILED {r['case']} {r['transport']} {r['op']} crc {r['crc']}: {w}")
    print(f"faults: {sum(r['pass'] for r in rs)} passed, {sum(not r['pass'] for r in rs)} failed")
    if a.summary:
        with open(a.summary, "w") as fh:
            json.dump({"all_pass": ok, "rows": rs}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
