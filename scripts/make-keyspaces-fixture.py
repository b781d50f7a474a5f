#!/usr/bin/env python3
"""Writes tests/fixtures/manifest-v3-keyspaces.bin from format.md ("Manifest", "Keyspaces"),
not from the writer: a version-3 manifest with two tables (one of the default keyspace, one
of keyspace 3, carrying table property 3), no cursors of the default keyspace, the filter
policy, last commit sequence 42, and store property 3: next id 4, live keyspaces 1 "users"
(uniform blocked-bloom at 1 %, LZ4, range filters of 16 bits per key, log number 7) and
3 "by-email" (monkey bloom at 10 bits per key, zstd, no range filters, log number 9, a
cursor "km" at level 1); id 2 was dropped.

Also writes tests/fixtures/manifest-v3-keyspace-filter.bin: the same manifest but for keyspace
property 1 on "by-email", its compaction filter "expire-sessions"."""
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

def policy(kind, allocation, value):
    return bytes([kind, allocation]) + struct.pack("<d", value)

def table(level, number, filter_file, kind, fpr, entries, tombstones, file_bytes, lo, hi, props):
    b = varint(level) + varint(number) + varint(filter_file) + bytes([kind])
    b += struct.pack("<d", fpr) + varint(entries) + varint(tombstones) + varint(file_bytes)
    b += varint(len(lo)) + lo + varint(len(hi)) + hi
    b += varint(len(props)) + b"".join(tagged(t, p) for t, p in props)
    return b

def keyspace(id, name, log_number, pol, compression, range_bits, cursors, props=()):
    b = varint(id) + varint(len(name)) + name + varint(log_number) + pol
    b += bytes([compression]) + struct.pack("<d", range_bits)
    b += varint(len(cursors))
    for level, key in cursors:
        b += varint(level) + varint(len(key)) + key
    return b + varint(len(props)) + b"".join(tagged(t, p) for t, p in props)

def manifest(by_email_props):
    body = varint(12) + varint(5)  # next_file, log_number
    body += varint(2)
    body += table(0, 8, 9, 2, 0.01, 100, 0, 4096, b"a", b"m", [])
    body += table(1, 10, 11, 1, 0.02, 50, 1, 2048, b"k", b"z", [(3, varint(3))])
    body += varint(0)  # cursors
    ks = varint(4) + varint(2)
    ks += keyspace(1, b"users", 7, policy(2, 0, 0.01), 1, 16.0, [])
    ks += keyspace(3, b"by-email", 9, policy(1, 1, 10.0), 2, 0.0, [(1, b"km")], by_email_props)
    props = [(1, policy(2, 0, 0.01)), (2, struct.pack("<Q", 42)), (3, ks)]
    body += varint(len(props)) + b"".join(tagged(t, p) for t, p in props)
    return b"FSMF" + struct.pack("<III", 3, len(body), zlib.crc32(body) & 0xFFFFFFFF) + body

fixtures = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures"
for name, props in [
    ("manifest-v3-keyspaces.bin", []),
    ("manifest-v3-keyspace-filter.bin", [(1, b"expire-sessions")]),
]:
    out = manifest(props)
    (fixtures / name).write_bytes(out)
    print(fixtures / name, len(out))
