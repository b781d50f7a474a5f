#!/usr/bin/env python3
"""Writes tests/fixtures/tombstones-v1.rdel from format.md ("Range tombstones"), not from the
writer: the magic, version 1, three zero bytes, a varint count, each tombstone as
start_len varint | start | end_len varint | end, then the CRC-32 of every byte before it."""
import struct, zlib, pathlib

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

tombstones = [(b"a", b"c"), (b"b", b"zz"), (b"k1", b"k9" + b"x" * 200)]
body = bytearray(b"FSRT" + bytes([1, 0, 0, 0]))
body += varint(len(tombstones))
for s, e in tombstones:
    body += varint(len(s)) + s + varint(len(e)) + e
body += struct.pack("<I", zlib.crc32(bytes(body)) & 0xFFFFFFFF)
path = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/tombstones-v1.rdel"
path.write_bytes(bytes(body))
print(path, len(body))
