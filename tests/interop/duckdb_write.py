"""Writes Parquet files with DuckDB for the import test (tests/parquet.rs): the same 1,000
rows (key BLOB `k0000`…, value VARCHAR `value of k0000`…, one NULL-free row per key) once
per codec, as OUT_DIR/duckdb-CODEC.parquet, with DuckDB's own choices otherwise (its row
groups, dictionary pages, statistics).

Usage: duckdb_write.py OUT_DIR CODEC...
"""

import os
import sys

import duckdb


def main():
    out, codecs = sys.argv[1], sys.argv[2:]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT encode(printf('k%04d', i)) AS key, "
        "printf('value of k%04d', i) AS value FROM range(1000) r(i)"
    )
    for codec in codecs:
        path = os.path.join(out, f"duckdb-{codec}.parquet")
        con.execute(f"COPY t TO '{path}' (FORMAT parquet, COMPRESSION {codec}, ROW_GROUP_SIZE 300)")
        print(path)


if __name__ == "__main__":
    main()
