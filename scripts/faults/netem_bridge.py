#!/usr/bin/env python3
"""A seeded userspace "netem": an impairing layer-2 bridge for kernels without
sch_netem (this one has none). Run it in a middle network namespace that owns two
veth ends (scripts/faults/netns.sh); frames read with AF_PACKET on one end are
written to the other after impairments drawn from one seeded RNG:

  --loss P           drop with probability P (0..1)
  --dup P            send twice
  --delay MS         one-way delay of every frame ...
  --reorder P        ... except this fraction, sent at once (netem's reorder:
                     they overtake the delayed ones); --reorder-corr C
  --corrupt P        flip one random bit of one random L4 payload octet of this
                     fraction of the IPv4 TCP/UDP frames that carry payload,
                     then fix the TCP/UDP checksum, so the receiver's TCP or UDP
                     stack does not notice: only the MPA CRC (TCP) or the SCTP
                     CRC32c (UDP encapsulation) can
  --corrupt-dir D    fwd (if1 -> if2), rev, or both (default both)

Loss, duplication and delay apply both ways.

--track-mpa follows every TCP byte stream as MPA (RFC 5044: Request/Reply frame,
then FPDUs = ULPDU_Length, ULPDU, PAD, CRC; Markers must be off), from the
original octets before any corruption, and records for every corrupted frame the
index of the FPDU it hit (counted from 0 after the Request/Reply, as rddp's
"FPDU n after setup"), which part of it (length, header, payload, pad, crc,
setup), and whether the corrupted octet was the first copy of that stream
position to pass (a retransmission of octets already forwarded never reaches the
receiver's MPA: TCP drops it). It also records the first Terminate FPDU of each
direction and its Layer/EType/Code, as it went over the wire.

Statistics (JSON) go to --stats FILE on exit (SIGTERM, SIGINT, --duration).
Offloads must be off on all four veth ends (MTU-sized frames, full checksums).
"""
import argparse
import array
import bisect
import heapq
import json
import random
import select
import signal
import socket
import struct
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23


def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def parse_l4(f):
    """(ip_off, proto, l4_off, payload_off, end) of an IPv4 TCP/UDP frame, else None."""
    if len(f) < 34 or f[12:14] != b"\x08\x00":
        return None
    ip = 14
    ihl = (f[ip] & 0x0F) * 4
    tot = struct.unpack_from("!H", f, ip + 2)[0]
    end = min(len(f), ip + tot)
    proto = f[ip + 9]
    l4 = ip + ihl
    if proto == 6 and end >= l4 + 20:
        return ip, proto, l4, l4 + (f[l4 + 12] >> 4) * 4, end
    if proto == 17 and end >= l4 + 8:
        return ip, proto, l4, l4 + 8, end
    return None


def fix_l4_csum(f, b):
    ip, proto, l4, _pay, end = b
    co = l4 + (16 if proto == 6 else 6)
    if proto == 17 and f[co:co + 2] == b"\0\0":
        return  # UDP checksum not used
    f[co:co + 2] = b"\0\0"
    seg = bytes(f[l4:end])
    pseudo = bytes(f[ip + 12:ip + 20]) + struct.pack("!BBH", 0, proto, len(seg))
    c = (~csum16(pseudo + seg)) & 0xFFFF
    if proto == 17 and c == 0:
        c = 0xFFFF
    struct.pack_into("!H", f, co, c)


class MpaDir:
    """One direction of one TCP connection, parsed as MPA from the original octets."""

    HDR_WANT = 22  # ULPDU_Length + untagged DDP header (18) + Terminate control (2)

    def __init__(self, name, isn):
        self.name = name
        self.isn = isn
        self.hi = 0  # stream octets forwarded in order so far (relative to ISN+1)
        self.stash = {}  # out-of-order segments: rel -> bytes
        self.stash_octets = 0
        self.untracked = None  # why the parse stopped, if it did
        self.setup_end = None  # stream offset where FPDU mode starts
        self.unit_start = 0
        self.unit_end = None
        self.hdr = bytearray()
        self.starts = array.array("Q")  # stream offset of each FPDU
        self.hdr_len = array.array("B")  # 2 + DDP/RDMAP header length of each FPDU
        self.ulpdu_len = array.array("I")
        self.terminate = None  # (fpdu index, "L/E/0xCC")
        self.corrupt = []  # [stream offset, first copy]
        self.forwarded_max = 0  # highest stream offset + 1 forwarded (not dropped) so far

    # -- stream reassembly (only in-order octets are parsed) --
    def segment(self, rel, data):
        # Parsed whether or not this copy is then dropped: a retransmission
        # carries the same octets.
        end = rel + len(data)
        if end <= self.hi or self.untracked:
            return
        if rel > self.hi:
            if rel not in self.stash:
                self.stash[rel] = bytes(data)
                self.stash_octets += len(data)
                if self.stash_octets > 64 << 20:
                    self.untracked = "reassembly stash over 64 MiB"
            return
        self.feed(data[self.hi - rel:])
        self.hi = end
        while self.stash:
            nxt = [r for r in self.stash if r <= self.hi]
            if not nxt:
                break
            for r in nxt:
                d = self.stash.pop(r)
                self.stash_octets -= len(d)
                if r + len(d) > self.hi:
                    self.feed(d[self.hi - r:])
                    self.hi = r + len(d)

    # -- MPA framing --
    def feed(self, data):
        i, n = 0, len(data)
        off = self.hi  # stream offset of data[0]
        while i < n and not self.untracked:
            if self.unit_end is None:
                # Collect the frame's 20 octets, or the FPDU's length, then as
                # much of its header as it has (never past its end).
                if self.setup_end is None:
                    want = 20
                elif len(self.hdr) < 2:
                    want = 2
                else:
                    want = min(self.HDR_WANT, self.fpdu_total(self.hdr))
                take = min(want - len(self.hdr), n - i)
                self.hdr += data[i:i + take]
                i += take
                if len(self.hdr) < want:
                    continue
                if self.setup_end is None:
                    self.setup_frame()
                elif want > 2:
                    self.fpdu_header()
            else:
                skip = min(self.unit_end - (off + i), n - i)
                i += skip
                if off + i >= self.unit_end:
                    self.unit_start = self.unit_end
                    self.unit_end = None
                    self.hdr = bytearray()

    @staticmethod
    def fpdu_total(h):
        ulen = struct.unpack_from("!H", h, 0)[0]
        return 2 + ulen + (-(2 + ulen)) % 4 + 4

    def setup_frame(self):
        h = self.hdr
        if not h.startswith(b"MPA ID Req Frame") and not h.startswith(b"MPA ID Rep Frame"):
            self.untracked = "no MPA Request/Reply at the start of the stream"
            return
        if h[16] & 0x80:
            self.untracked = "Markers negotiated"
            return
        pd_len = struct.unpack_from("!H", h, 18)[0]
        self.setup_end = self.unit_start + 20 + pd_len
        self.unit_end = self.setup_end

    def fpdu_header(self):
        h = self.hdr
        total = self.fpdu_total(h)
        ulen = struct.unpack_from("!H", h, 0)[0]
        idx = len(self.starts)
        self.starts.append(self.unit_start)
        self.ulpdu_len.append(ulen)
        tagged = len(h) > 2 and h[2] & 0x80
        self.hdr_len.append(2 + (14 if tagged else 18))
        # RDMAP opcode 0x7 in an untagged segment: Terminate (RFC 5040 §4.8).
        if self.terminate is None and len(h) >= 22 and not tagged and h[3] & 0x0F == 0x7:
            self.terminate = (idx, "%d/%d/%#04x" % (h[20] >> 4, h[20] & 0x0F, h[21]))
        self.unit_end = self.unit_start + total

    # -- corruption accounting --
    def where(self, pos):
        """(FPDU index or None, part) of stream offset `pos`, once parsed."""
        if self.setup_end is None or pos < self.setup_end:
            return None, "setup"
        i = bisect.bisect_right(self.starts, pos) - 1
        if i < 0 or pos >= self.hi:
            return None, "unparsed"
        rel = pos - self.starts[i]
        ulen = self.ulpdu_len[i]
        if rel < 2:
            part = "length"
        elif rel < self.hdr_len[i]:
            part = "header"
        elif rel < 2 + ulen:
            part = "payload"
        elif rel < self.fpdu_total(struct.pack("!H", ulen)) - 4:
            part = "pad"
        else:
            part = "crc"
        return i, part

    def report(self):
        events = []
        for pos, first in self.corrupt:
            idx, part = self.where(pos)
            events.append({"offset": pos, "fpdu": idx, "part": part, "first_copy": first})
        first = [e for e in events if e["first_copy"] and e["fpdu"] is not None]
        first.sort(key=lambda e: e["offset"])
        return {
            "flow": self.name,
            "stream_octets": self.hi,
            "fpdus": len(self.starts),
            "untracked": self.untracked,
            "terminate": None if self.terminate is None else
            {"fpdu": self.terminate[0], "code": self.terminate[1]},
            "corrupted": events,
            "first_corrupted_fpdu": first[0]["fpdu"] if first else None,
        }


class Tracker:
    def __init__(self):
        self.dirs = {}
        self.done = []

    def frame(self, f, b):
        """Track a TCP frame's payload; returns the MpaDir (or None) and the payload's rel seq."""
        ip, proto, l4, pay, end = b
        if proto != 6:
            return None, 0
        src, dst = socket.inet_ntoa(f[ip + 12:ip + 16]), socket.inet_ntoa(f[ip + 16:ip + 20])
        sport, dport, seq = struct.unpack_from("!HHI", f, l4)
        flags = f[l4 + 13]
        key = (src, sport, dst, dport)
        if flags & 0x02:  # SYN: a new stream in this direction
            old = self.dirs.get(key)
            if old is None or old.isn != seq:
                if old is not None:
                    self.done.append(old)
                self.dirs[key] = MpaDir("%s:%d>%s:%d" % key, seq)
            return None, 0
        d = self.dirs.get(key)
        if d is None or end <= pay:
            return d, 0
        rel = (seq - d.isn - 1) & 0xFFFFFFFF
        d.segment(rel, bytes(f[pay:end]))
        return d, rel

    def report(self):
        return [d.report() for d in self.done + list(self.dirs.values())]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("if1")
    ap.add_argument("if2")
    for k in ("loss", "dup", "corrupt", "reorder", "reorder_corr", "delay"):
        ap.add_argument("--" + k.replace("_", "-"), type=float, default=0.0)
    ap.add_argument("--corrupt-dir", choices=("fwd", "rev", "both"), default="both")
    ap.add_argument("--track-mpa", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--stats", required=True, help="write the JSON statistics here on exit")
    ap.add_argument("--ready", help="create this file once both sockets are bound")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    socks = []
    for name in (a.if1, a.if2):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        s.bind((name, 0))
        s.setblocking(False)
        socks.append(s)
    fwd_in, rev_in = socks
    peer = {fwd_in.fileno(): rev_in, rev_in.fileno(): fwd_in}
    st = dict(rx=0, tx=0, lost=0, dup=0, corrupted=0, corrupted_tcp=0, corrupted_udp=0,
              reordered=0, delayed=0, tx_err=0)
    tracker = Tracker() if a.track_mpa else None
    heap, seq, last_reord = [], 0, False
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    t_end = time.monotonic() + a.duration
    poller = select.poll()
    for s in socks:
        poller.register(s.fileno(), select.POLLIN)
    if a.ready:
        open(a.ready, "w").close()

    def send(out, frame):
        try:
            out.send(frame)
            st["tx"] += 1
        except OSError:
            st["tx_err"] += 1

    while not stop[0]:
        now = time.monotonic()
        if now >= t_end:
            break
        while heap and heap[0][0] <= now:
            _, _, out, fr = heapq.heappop(heap)
            send(out, fr)
        tmo = 200 if not heap else max(0.0, (heap[0][0] - now) * 1000)
        for fd, _ in poller.poll(tmo):
            src = fwd_in if fd == fwd_in.fileno() else rev_in
            out = peer[fd]
            forward = src is fwd_in
            for _ in range(64):
                try:
                    fr = src.recv(65535)
                except BlockingIOError:
                    break
                st["rx"] += 1
                b = None
                d = None
                if tracker is not None or a.corrupt:
                    b = parse_l4(fr)
                if tracker is not None and b is not None:
                    d, rel = tracker.frame(fr, b)
                if a.loss and rng.random() < a.loss:
                    st["lost"] += 1
                    continue
                copies = 2 if (a.dup and rng.random() < a.dup) else 1
                st["dup"] += copies - 1
                if (a.corrupt and b is not None and b[4] > b[3]
                        and (a.corrupt_dir == "both" or forward == (a.corrupt_dir == "fwd"))
                        and rng.random() < a.corrupt):
                    f = bytearray(fr)
                    i = rng.randrange(b[3], b[4])
                    f[i] ^= 1 << rng.randrange(8)
                    fix_l4_csum(f, b)
                    fr = bytes(f)
                    st["corrupted"] += 1
                    st["corrupted_tcp" if b[1] == 6 else "corrupted_udp"] += 1
                    if d is not None:
                        pos = rel + (i - b[3])
                        # First copy: no frame forwarded before carried this octet.
                        first = pos >= d.forwarded_max
                        d.corrupt.append([pos, first])
                if d is not None and b[4] > b[3]:
                    d.forwarded_max = max(d.forwarded_max, rel + b[4] - b[3])
                dl = a.delay
                if a.reorder and dl > 0:
                    p = a.reorder if not last_reord else a.reorder + a.reorder_corr * (1 - a.reorder)
                    last_reord = rng.random() < p
                    if last_reord:
                        dl = 0
                        st["reordered"] += 1
                for _ in range(copies):
                    if dl > 0:
                        seq += 1
                        st["delayed"] += 1
                        heapq.heappush(heap, (time.monotonic() + dl / 1000.0, seq, out, fr))
                    else:
                        send(out, fr)
    for _, _, out, fr in sorted(heap):
        send(out, fr)
    if tracker is not None:
        st["mpa"] = tracker.report()
    with open(a.stats, "w") as fh:
        json.dump(st, fh)


if __name__ == "__main__":
    main()
