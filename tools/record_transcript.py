#!/usr/bin/env python3
"""Records a transcript of commands and a reference server's exact replies,
for tests that replay it against tally and compare byte for byte (the
tests/data/*.transcript files). Used where the reference is a server CI
does not have: Redis 8's hash field expiry, from tools/redis8.sh.

Input: one command per line, words split on spaces; `#` starts a comment;
`SLEEP <ms>` waits. Output lines: `> command` then `< reply`, the reply's
RESP bytes with CR, LF and backslash escaped.

Usage: tools/record_transcript.py <port> < commands > transcript
"""
import socket
import sys
import time


def encode(words):
    out = b"*%d\r\n" % len(words)
    for w in words:
        w = w.encode()
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    return out


def read_reply(sock, buf):
    """One whole RESP2 reply from buf (reading more as needed)."""
    def need(n):
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk

    def line_end(at):
        while True:
            i = buf.find(b"\r\n", at)
            if i >= 0:
                return i
            need(len(buf) + 1)

    def frame(at):
        need(at + 1)
        end = line_end(at)
        kind, head = buf[at:at + 1], buf[at + 1:end]
        if kind in b"+-:":
            return end + 2
        n = int(head)
        if kind == b"$":
            if n < 0:
                return end + 2
            need(end + 2 + n + 2)
            return end + 2 + n + 2
        at = end + 2
        for _ in range(max(n, 0)):
            at = frame(at)
        return at

    end = frame(0)
    return buf[:end], buf[end:]


def main():
    sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    buf = b""
    for line in sys.stdin:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split(" ")
        if words[0] == "SLEEP":
            time.sleep(int(words[1]) / 1000)
            print(f"> {line}")
            continue
        sock.sendall(encode(words))
        reply, buf = read_reply(sock, buf)
        escaped = reply.decode("latin-1").replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")
        print(f"> {line}")
        print(f"< {escaped}")


main()
