"""Point queries on an exported directory through DataFusion and DuckDB.

Usage: engines.py DIR QUERIES

QUERIES has one line per key: `KIND HEX MODES`, KIND `present` or `absent`, HEX the key,
MODES a comma-separated subset of `on,off,duckdb`: DataFusion with Bloom filters read
(`on`), DataFusion with `datafusion.execution.parquet.bloom_filter_on_read = false`
(`off`), DuckDB (`duckdb`). One line is printed per key and mode:

  datafusion MODE HEX stats_total=A stats_matched=B bloom_total=C bloom_matched=D rows_scanned=E value=V
  duckdb - HEX excluded=G1,G2,... scanned=S total=T value=V

B: row groups whose min/max statistics admit the key; D: of those, the ones the Bloom
filter did not exclude (the groups read); E: rows the scan produced before the filter;
V: the value returned in hex, `-` for none, several joined by `+`; G: the row groups (in
file order, numbered across the files in name order) for which DuckDB's
`parquet_bloom_probe` reports `bloom_filter_excludes`; S and T: `row_groups_scanned` and
`total_row_groups_to_scan` of the query's table scan in DuckDB's JSON profile. The caller (tests/parquet.rs, or
`store bench export --engines`) decides what is right.
"""

import glob
import json
import os
import re
import shutil
import sys
import tempfile

import datafusion
import duckdb
from datafusion import SessionConfig, SessionContext

METRIC = re.compile(r"(\w+)=([\d.]+) ?(K|M)? total → ([\d.]+) ?(K|M)? matched")
ROWS = re.compile(r"DataSourceExec:.*?metrics=\[output_rows=([\d.]+) ?(K|M)?,")


def number(digits, unit):
    return round(float(digits) * {None: 1, "": 1, "K": 1e3, "M": 1e6}[unit])


def datafusion_context(directory, bloom):
    cfg = SessionConfig().set(
        "datafusion.execution.parquet.bloom_filter_on_read", "true" if bloom else "false"
    )
    ctx = SessionContext(cfg)
    ctx.register_parquet("t", directory)
    return ctx


def datafusion_query(ctx, key_hex):
    where = f"key = X'{key_hex}'"
    plan = "".join(
        row["plan"]
        for batch in ctx.sql(f"EXPLAIN ANALYZE SELECT value FROM t WHERE {where}").collect()
        for row in batch.to_pylist()
    )
    metrics = {}
    for name, total, tunit, matched, munit in METRIC.findall(plan):
        metrics[name] = (number(total, tunit), number(matched, munit))
    rows = ROWS.search(plan.replace("\n", " "))
    scanned = number(rows.group(1), rows.group(2)) if rows else -1
    values = [
        v.hex()
        for batch in ctx.sql(f"SELECT value FROM t WHERE {where}").collect()
        for v in batch.column(0).to_pylist()
    ]
    stats = metrics.get("row_groups_pruned_statistics", (-1, -1))
    bloom = metrics.get("row_groups_pruned_bloom_filter", (-1, -1))
    return (
        f"stats_total={stats[0]} stats_matched={stats[1]} bloom_total={bloom[0]} "
        f"bloom_matched={bloom[1]} rows_scanned={scanned} value={'+'.join(values) or '-'}"
    )


def duckdb_query(con, files, key_hex):
    key = bytes.fromhex(key_hex)
    excluded = []
    base = 0
    for f in files:
        rows = con.execute(
            "SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe(?, 'key', ?) "
            "ORDER BY row_group_id",
            [f, key],
        ).fetchall()
        excluded += [str(base + g) for g, ex in rows if ex]
        base += len(rows)
    query = f"SELECT value FROM read_parquet({files!r}) WHERE key = from_hex('{key_hex}')"
    profile = json.loads(con.execute(f"EXPLAIN ANALYZE {query}").fetchall()[0][1])
    scans = list(table_scans(profile))
    scanned = sum(s.get("row_groups_scanned", 0) for s in scans)
    total = sum(s.get("total_row_groups_to_scan", 0) for s in scans)
    values = [v.hex() for (v,) in con.execute(query).fetchall()]
    return (
        f"excluded={','.join(excluded) or '-'} scanned={scanned} total={total} "
        f"value={'+'.join(values) or '-'}"
    )


def table_scans(node):
    if isinstance(node, dict):
        if node.get("type") == "TABLE_SCAN":
            yield node
        for child in node.get("children", []) + node.get("operator", []):
            yield from table_scans(child)


def main():
    directory, queries = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(directory, "*.parquet")))
    ctx = {"on": datafusion_context(directory, True), "off": datafusion_context(directory, False)}
    con = duckdb.connect()
    scratch = tempfile.mkdtemp(prefix="engines-py-")
    con.execute("PRAGMA enable_profiling = 'json'")
    # EXPLAIN ANALYZE returns the profile; the copy every query also writes goes to a file.
    con.execute(f"PRAGMA profiling_output = '{os.path.join(scratch, 'profile.json')}'")
    print(f"# datafusion {datafusion.__version__} duckdb {duckdb.__version__}", flush=True)
    with open(queries) as lines:
        for line in lines:
            kind, key_hex, modes = line.split()
            for mode in modes.split(","):
                if mode in ctx:
                    print(f"datafusion {mode} {key_hex} {datafusion_query(ctx[mode], key_hex)}")
                elif mode == "duckdb":
                    print(f"duckdb - {key_hex} {duckdb_query(con, files, key_hex)}")
                else:
                    sys.exit(f"unknown mode {mode}")
    sys.stdout.flush()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
