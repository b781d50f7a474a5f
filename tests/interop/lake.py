"""Register exported Parquet files as a Delta Lake table and as an Iceberg table, without
rewriting them (so their Bloom filters stay). Not part of CI; run by hand as
docs/scale-out.md says, in a venv with `deltalake==1.6.6` and
`pyiceberg[sql-sqlite,pyarrow]==0.12.0`.

Usage: lake.py EXPORT_DIR WORK_DIR

Copies EXPORT_DIR to WORK_DIR/delta and WORK_DIR/ice, converts the first in place to a
Delta table (delta-rs `convert_to_deltalake`: writes `_delta_log/` beside the files) and
adds the files of the second to a new Iceberg table in a SQLite catalog (pyiceberg
`add_files`), then checks that the data files are byte-identical and readable through both.
"""

import glob
import hashlib
import shutil
import sys

import pyarrow.parquet as pq
from deltalake import DeltaTable, convert_to_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def digests(pattern):
    return {f: hashlib.sha256(open(f, "rb").read()).hexdigest() for f in glob.glob(pattern)}


def main():
    export, work = sys.argv[1], sys.argv[2]
    shutil.copytree(export, f"{work}/delta")
    shutil.copytree(export, f"{work}/ice")
    original = sorted(digests(f"{export}/*.parquet").values())

    convert_to_deltalake(f"{work}/delta")
    dt = DeltaTable(f"{work}/delta")
    print("delta: version", dt.version(), "files", dt.file_uris())
    print("delta: data files unchanged:", sorted(digests(f"{work}/delta/*.parquet").values()) == original)
    print("delta: rows", dt.to_pyarrow_table().num_rows)

    catalog = SqlCatalog("local", uri=f"sqlite:///{work}/iceberg.db", warehouse=f"file://{work}/warehouse")
    catalog.create_namespace("fs")
    files = sorted(glob.glob(f"{work}/ice/*.parquet"))
    table = catalog.create_table("fs.export", schema=pq.read_schema(files[0]))
    table.add_files(file_paths=[f"file://{f}" for f in files])
    table = catalog.load_table("fs.export")
    print("iceberg: snapshot", table.current_snapshot().snapshot_id,
          "files", [t.file.file_path for t in table.scan().plan_files()])
    print("iceberg: data files unchanged:", sorted(digests(f"{work}/ice/*.parquet").values()) == original)
    print("iceberg: rows", table.scan().to_arrow().num_rows)
    first = pq.read_table(files[0], columns=["key"]).column(0)[0].as_py()
    print("iceberg: key", first, "->", table.scan(row_filter=EqualTo("key", first)).to_arrow().to_pylist())


if __name__ == "__main__":
    main()
