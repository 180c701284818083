#!/usr/bin/env python3
"""udp_probe: send COUNT numbered UDP datagrams to 127.0.0.1:PORT and count how many arrive.

    udp_probe.py [--port 31100] [--count 20000] [--expect-loss P] [--tolerance T]

The sender and the receiver are two sockets in this process; the sender is paced so the
receive buffer never overflows (a drop must come from the firewall, not from the socket).
With --expect-loss P the exit status is 0 only if the measured loss is within P +- T
percentage points (default T = 1.5) and at least one datagram was dropped when P > 0.
"""
import argparse
import socket
import struct
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=31100)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--expect-loss", type=float)
    ap.add_argument("--tolerance", type=float, default=1.5)
    a = ap.parse_args()

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind((a.host, a.port))
    rx.settimeout(0.5)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((a.host, 0))

    seen = bytearray(a.count)
    got = dup = bad = 0
    payload_pad = b"\xa5" * max(0, a.size - 8)
    t0 = time.monotonic()
    for i in range(a.count):
        tx.sendto(struct.pack("!Q", i) + payload_pad, (a.host, a.port))
        # drain what has arrived so far every 256 datagrams
        if i % 256 == 255:
            rx.setblocking(False)
            try:
                while True:
                    got, dup, bad = take(rx.recv(65536), seen, a, got, dup, bad)
            except BlockingIOError:
                pass
            rx.settimeout(0.5)
    try:
        while True:
            got, dup, bad = take(rx.recv(65536), seen, a, got, dup, bad)
    except socket.timeout:
        pass
    dt = time.monotonic() - t0
    loss = 100.0 * (a.count - got) / a.count
    print(f"udp_probe: sent {a.count} to {a.host}:{a.port}, received {got} "
          f"({100.0 * got / a.count:.2f} %), loss {loss:.2f} %, duplicates {dup}, "
          f"corrupt {bad}, {dt:.2f} s")
    ok = dup == 0 and bad == 0
    if a.expect_loss is not None:
        ok = ok and abs(loss - a.expect_loss) <= a.tolerance
        if a.expect_loss > 0:
            ok = ok and got < a.count
        print(f"udp_probe: expected {a.expect_loss} +- {a.tolerance} %: "
              f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def take(data, seen, a, got, dup, bad):
    if len(data) != max(8, a.size) or data[8:] != b"\xa5" * (len(data) - 8):
        return got, dup, bad + 1
    (i,) = struct.unpack("!Q", data[:8])
    if i >= a.count:
        return got, dup, bad + 1
    if seen[i]:
        return got, dup + 1, bad
    seen[i] = 1
    return got + 1, dup, bad


if __name__ == "__main__":
    sys.exit(main())
