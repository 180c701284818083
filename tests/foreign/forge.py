#!/usr/bin/env python3
"""forge: attack a running rusnic job from outside it, on the loopback.

    forge.py --ports LO-HI [--sniff-seconds S] [--per-kind N] [--capture N]

Not a member of the job: it never sees the modex, so it does not know any process's
key. It sniffs the job's datagrams on `lo` (an AF_PACKET socket: root), which gives it
what an outsider could at best learn: the ports, the members' sender ids, sequence
numbers in use and the address of a PUT region that is open right now. Then it sends,
to the addresses and ports it saw traffic to:

  nokey   valid wire format and CRC, a sender id of no member, random tag
  member  a real member's sender id, the sequence numbers the receiver expects next,
          a piggy-backed ACK, valid CRC, a tag computed with the zero key or a random one
  ack     standalone ACKs with a member's id acknowledging everything, with credit
  put     PUT segments into the captured open region (same address, offset and fragment,
          the next sequence numbers), payload 0xEE, valid CRC
  replay  captured datagrams, byte for byte (their tags are valid: the receive window
          must discard them as already delivered)

and prints one JSON line: how many of each it sent, and the kernel's UDP drop counters
(/proc/net/snmp) before and after, so a test can tell which datagrams arrived.
"""
import argparse
import json
import os
import random
import socket
import struct
import sys
import time

MAGIC, VERSION = 0xB5, 2
ACK, FRAG, CHUNK, PING, PONG = 1, 2, 3, 4, 5
F_ACK, F_PUT, F_HDR_CRC = 0x01, 0x02, 0x10
HEADER_LEN = 32
HEADER = struct.Struct("<BBBBBBBBQHHHHII")  # ... payload_len, crc, auth

_TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _TABLE.append(c)


def crc32c(data, crc=0xFFFFFFFF):
    t = _TABLE
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc


def header_len(kind, sacks, put):
    n = HEADER_LEN + 4 * sacks
    if kind == CHUNK:
        n += 12
    if put:
        n += 8
    if kind in (PING, PONG):
        n += 8
    return n


def seal(head, payload, tag):
    """Header (crc and auth fields ignored) + payload with a valid CRC and `tag` (the CRC
    field holds the CRC XORed with the tag)."""
    head = bytearray(head)
    flags = head[4]
    covered = bytes(head[:24]) + bytes(head[32:])
    crc = crc32c(covered)
    if not flags & F_HDR_CRC:
        crc = crc32c(payload, crc)
    crc ^= 0xFFFFFFFF
    struct.pack_into("<II", head, 24, crc ^ tag, tag)
    return bytes(head) + payload


def make(kind, channel, flags, sender, seq, ack, credits, ext=b"", payload=b"", tag=0):
    head = HEADER.pack(MAGIC, VERSION, kind, channel, flags, 0, 0, 0, sender, seq,
                       ack, credits, len(payload), 0, 0) + ext
    return seal(head, payload, tag)


def parse(d):
    """(kind, channel, flags, sender, seq, ack, credits, hlen) of one of our datagrams."""
    (_, _, kind, ch, flags, _, sacks, _, sender, seq, ack, credits, plen, _, _) = \
        HEADER.unpack_from(d)
    return kind, ch, flags, sender, seq, ack, credits, header_len(kind, sacks, flags & F_PUT)


def udp_counters():
    with open("/proc/net/snmp") as f:
        rows = [l.split() for l in f if l.startswith("Udp:")]
    names, values = rows[0][1:], [int(v) for v in rows[1][1:]]
    c = dict(zip(names, values))
    return {k: c.get(k, 0) for k in ("InDatagrams", "NoPorts", "InErrors", "RcvbufErrors")}


class Sniffer:
    """The job's datagrams to ports LO..HI, as the loopback carries them."""

    def __init__(self, lo, hi, ours):
        self.lo, self.hi, self.ours = lo, hi, ours
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        self.s.bind(("lo", 0))

    def next(self, timeout):
        """((address, port), datagram) of the next one, or None after `timeout` seconds."""
        self.s.settimeout(timeout)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                frame, addr = self.s.recvfrom(1 << 17)
            except (socket.timeout, BlockingIOError):
                return None
            if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14 + 20 + 8:
                continue
            ip = frame[14:]
            if ip[0] >> 4 != 4 or ip[9] != 17:
                continue
            ihl = (ip[0] & 0xF) * 4
            sport, dport = struct.unpack_from("!HH", ip, ihl)
            d = ip[ihl + 8:]
            if sport != self.ours and self.lo <= dport <= self.hi and len(d) >= HEADER_LEN and d[0] == MAGIC \
                    and d[1] == VERSION:
                return (socket.inet_ntoa(ip[16:20]), dport), bytes(d)
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True)
    ap.add_argument("--sniff-seconds", type=float, default=6)
    ap.add_argument("--per-kind", type=int, default=200)
    ap.add_argument("--capture", type=int, default=300)
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.ports.split("-"))
    rng = random.Random(20261125)

    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.bind(("0.0.0.0", 0))
    sniffer = Sniffer(lo, hi, out.getsockname()[1])  # not what we send ourselves
    before = udp_counters()
    sent = {"nokey": 0, "member": 0, "ack": 0, "put": 0, "replay": 0, "replay_data": 0}
    captured = []

    def send(kind, to, d):
        out.sendto(d, to)
        sent[kind] += 1

    def tag():
        return rng.choice([0, rng.getrandbits(32)])

    def forge(to, d):
        """Forgeries modelled on the freshest datagram: its sender's next sequence
        numbers (up to a grant ahead, where the receiver would take them)."""
        kind, ch, flags, sender, seq, ack, credits, hlen = parse(d)
        ahead = (seq + rng.randrange(1, 128)) & 0xFFFF
        if sent["nokey"] < a.per_kind:
            # (1) no member's id, no key.
            send("nokey", to, make(FRAG, ch, F_ACK, rng.getrandbits(64),
                                     rng.getrandbits(16), rng.getrandbits(16), 64,
                                     payload=os.urandom(40), tag=tag()))
        if kind not in (FRAG, CHUNK):
            return
        if sent["member"] < a.per_kind:
            # (2) a member's id, the next sequence numbers.
            send("member", to, make(FRAG, ch, F_ACK, sender, ahead, ack, credits,
                                      payload=b"forged" * 8, tag=tag()))
        if sent["ack"] < a.per_kind:
            send("ack", to, make(ACK, 0, F_ACK, sender, 0, (ack + 200) & 0xFFFF, 4000,
                                   tag=tag()))
        if flags & F_PUT and sent["put"] < a.per_kind:
            # (3) into the open region: same address (and chunk), payload 0xEE; the
            # original's CRC policy (HDR_CRC between same-node peers).
            ext = d[HEADER_LEN:hlen]
            n = len(d) - hlen if flags & F_HDR_CRC else min(len(d) - hlen, 2048)
            if n > 0:
                send("put", to, make(kind, ch, flags & (F_ACK | F_PUT | F_HDR_CRC),
                                       sender, ahead, ack, credits, ext=ext,
                                       payload=b"\xEE" * n, tag=tag()))

    end = time.monotonic() + a.sniff_seconds
    while time.monotonic() < end:
        got = sniffer.next(max(0.0, end - time.monotonic()))
        if got is None:
            break
        if len(captured) < a.capture:
            captured.append(got)
        forge(*got)
        if all(sent[k] >= a.per_kind for k in ("nokey", "member", "ack", "put")):
            break
    data = [(p, d) for p, d in captured if parse(d)[0] in (FRAG, CHUNK)]
    puts = [(p, d) for p, d in data if parse(d)[2] & F_PUT]
    ports = sorted({f"{a}:{p}" for (a, p), _ in captured})
    # (4) replays, verbatim, twice.
    for _ in range(2):
        for to, d in captured:
            send("replay", to, d)
            sent["replay_data"] += parse(d)[0] in (FRAG, CHUNK)
            if sent["replay"] % 50 == 0:
                time.sleep(0.002)
    time.sleep(0.2)
    after = udp_counters()
    print(json.dumps({
        "captured": len(captured), "captured_puts": len(puts), "ports": ports,
        "sent": sent, "crafted": sent["nokey"] + sent["member"] + sent["ack"] + sent["put"],
        "udp_before": before, "udp_after": after,
    }))
    return 0 if captured else 1


if __name__ == "__main__":
    sys.exit(main())
