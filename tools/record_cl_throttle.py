#!/usr/bin/env python3
"""Records what redis-cell answers to a random stream of CL.THROTTLE calls,
for tests/tests/throttle.rs to replay against tally.

redis-cell reads the wall clock, so redis-server runs under libfaketime with
a frozen clock that this script moves between calls (a timestamp file read
on every call). Each call therefore runs at a known microsecond, which the
replay sets on tally's manual clock: the transcript is exact, with no
tolerance on times.

    apt-get install faketime
    # build redis-cell 0.5 (github:brandur/redis-cell): cargo build --release
    # build redis-server 7.0.15 with libc's malloc (apt-get source redis;
    # make MALLOC=libc): the jemalloc of Debian's build calls the clock while
    # libfaketime starts, and libfaketime refuses that recursion
    python3 tools/record_cl_throttle.py path/to/redis-server path/to/libredis_cell.so \
        > tests/fixtures/cl_throttle_redis_cell.txt

The output is one call a line:
    <µs since the start> <key> <max_burst> <count> <period> <quantity> \
        | <reply> | <PTTL> | <GET>
where <reply> is the five integers space-separated, or `ERR <text>`.
"""

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

# tally's tests start their manual clock here (tally_tests::T0_MS).
T0_MS = 1_720_000_000_000
PORT = 7479
CALLS = 2000
SEED = 20261205
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def stamp(offset_us):
    """libfaketime's absolute form of T0 + offset_us (a frozen clock).

    libfaketime reads the fraction as a double and truncates it to
    nanoseconds, which puts some microseconds one nanosecond early
    (.019894 reads as 19893999 ns); half a nanosecond more lands every one
    on its exact nanosecond, as tally's microsecond clock has it.
    """
    at = datetime.fromtimestamp(T0_MS / 1000, timezone.utc) + timedelta(microseconds=offset_us)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f") + "0005"


class Conn:
    """Just enough RESP2 for integers, arrays of them, bulks and errors."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            arg = str(arg).encode()
            out.append(f"${len(arg)}\r\n".encode() + arg + b"\r\n")
        self.sock.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.file.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:].decode()
        if kind == b":":
            return int(rest)
        if kind == b"-":
            return "ERR " + rest
        if kind == b"$":
            if rest == "-1":
                return None
            data = self.file.read(int(rest) + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        if kind == b"+":
            return rest
        raise ValueError(line)


def random_limit(rng):
    """A (max_burst, count, period) as gateways set them, or an odd one."""
    burst = rng.choice([0, 1, 2, 4, 9, 19, 99, rng.randrange(200)])
    count = rng.choice([1, 2, 3, 7, 10, 30, 100, 1000, rng.randrange(1, 5000)])
    period = rng.choice([1, 2, 3, 7, 60, 3600, rng.randrange(1, 500)])
    return burst, count, period


def random_call(rng, limits):
    """Mostly a key under its own limit, as a gateway calls; sometimes a
    key under another limit than before; a few calls redis-cell refuses."""
    key = rng.randrange(len(limits))
    burst, count, period = limits[key]
    if rng.random() < 0.05:
        burst, count, period = random_limit(rng)
    quantity = rng.choice([1, 1, 1, 1, 0, 2, 3, 5, 10, rng.randrange(50)])
    if rng.random() < 0.03:
        # Refusals: a negative or zero argument somewhere.
        which = rng.randrange(4)
        values = [burst, count, period, quantity]
        values[which] = rng.choice([-1, 0, -100])
        burst, count, period, quantity = values
    return f"user:{key}", burst, count, period, quantity


def main():
    redis_server, module = sys.argv[1], sys.argv[2]
    rng = random.Random(SEED)
    limits = [random_limit(rng) for _ in range(12)]
    clock_file = tempfile.NamedTemporaryFile("w", delete=False, suffix=".faketime")
    clock_file.write(stamp(0) + "\n")
    clock_file.close()
    env = dict(
        os.environ,
        LD_PRELOAD=LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE=clock_file.name,
        FAKETIME_NO_CACHE="1",
        # The event loop's timers keep real time.
        FAKETIME_DONT_FAKE_MONOTONIC="1",
        TZ="UTC",
    )
    server = subprocess.Popen(
        [redis_server, "--port", str(PORT), "--save", "", "--appendonly", "no",
         "--loadmodule", os.path.abspath(module)],
        env=env, stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                conn = Conn(PORT)
                break
            except OSError:
                time.sleep(0.05)
        offset_us = 0
        for _ in range(CALLS):
            # Most calls close together, some after a pause, a few after
            # whole periods.
            offset_us += rng.choice([
                0, rng.randrange(1, 1000), rng.randrange(1000, 500_000),
                rng.randrange(500_000, 5_000_000), rng.randrange(5_000_000, 120_000_000),
            ])
            with open(clock_file.name, "w") as f:
                f.write(stamp(offset_us) + "\n")
            key, burst, count, period, quantity = random_call(rng, limits)
            reply = conn.call("CL.THROTTLE", key, burst, count, period, quantity)
            reply = reply if isinstance(reply, str) else " ".join(map(str, reply))
            pttl = conn.call("PTTL", key)
            stored = conn.call("GET", key)
            print(f"{offset_us} {key} {burst} {count} {period} {quantity} | {reply} | {pttl} | {stored}")
    finally:
        server.terminate()
        server.wait()
        os.unlink(clock_file.name)


if __name__ == "__main__":
    main()
