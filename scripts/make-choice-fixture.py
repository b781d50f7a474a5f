#!/usr/bin/env python3
"""Writes tests/fixtures/manifest-v3-choice.bin from format.md ("Manifest", "Allocation
choice"), not from the writer: a version-3 manifest with three tables (two in L0, one in
L1), the filter policy monkey blocked-bloom at 9.585 bits per key (the memory of 1 % on every
table), last commit sequence 7, and store property 4: 2 L0 tables, 1 deeper level, reach
measured, uniform 0.025 and monkey 0.0125 predicted wasted reads per absent lookup."""
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

def tagged(tag, payload):
    return varint(tag) + varint(len(payload)) + payload

def table(level, number, filter_file, kind, fpr, entries, file_bytes, lo, hi):
    b = varint(level) + varint(number) + varint(filter_file) + bytes([kind])
    b += struct.pack("<d", fpr) + varint(entries) + varint(0) + varint(file_bytes)
    b += varint(len(lo)) + lo + varint(len(hi)) + hi
    return b + varint(0)  # no table properties

body = varint(20) + varint(6)  # next_file, log_number
body += varint(3)
body += table(0, 14, 15, 2, 0.001, 100, 4096, b"a", b"m")
body += table(0, 12, 13, 2, 0.001, 100, 4096, b"b", b"n")
body += table(1, 10, 11, 2, 0.02, 5000, 65536, b"a", b"z")
body += varint(0)  # cursors
choice = struct.pack("<IBB", 2, 1, 1) + struct.pack("<dd", 0.025, 0.0125)
assert len(choice) == 22
props = [(1, bytes([2, 1]) + struct.pack("<d", 9.585)), (2, struct.pack("<Q", 7)), (4, choice)]
body += varint(len(props)) + b"".join(tagged(t, p) for t, p in props)
out = b"FSMF" + struct.pack("<III", 3, len(body), zlib.crc32(body) & 0xFFFFFFFF) + body
path = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/manifest-v3-choice.bin"
path.write_bytes(out)
print(path, len(out))
