//! Parquet export and import through the command line: `store export`/`import --parquet`,
//! bad input (exit 2 with a clear message), and files written by DuckDB. The library's side
//! (round trips, row groups, Bloom filters, pruning by DataFusion and DuckDB) is tested in
//! the library's tests/parquet.rs.

mod common;
#[path = "../../tests/support/interop.rs"]
mod interop;

use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// The command line: export and import, and bad input (exit 2).

fn store_cmd(dir: &Path, args: &[&str]) -> common::Output {
    let d = dir.to_str().unwrap();
    let mut all = vec!["--dir", d];
    all.extend_from_slice(args);
    common::run_store(&all, b"", None, None, Duration::from_secs(60))
}

#[track_caller]
fn exit2(o: common::Output, says: &str) {
    assert_eq!(o.code, 2, "stderr: {}", o.stderr);
    assert!(
        o.stderr.contains(says),
        "stderr {:?} lacks {says:?}",
        o.stderr
    );
}

/// Writes a Parquet file with the given message type and one row group of `rows` rows,
/// filling INT64 columns with the row number and binary ones with `b"x{row}"`, with nulls
/// at every 3rd row of optional columns.
fn write_foreign(path: &Path, message: &str, rows: usize) {
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let schema = Arc::new(parquet::schema::parser::parse_message_type(message).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut w =
        SerializedFileWriter::new(File::create(path).unwrap(), schema.clone(), props).unwrap();
    let descr = parquet::schema::types::SchemaDescriptor::new(schema.clone());
    let mut rg = w.next_row_group().unwrap();
    let mut index = 0;
    while let Some(mut col) = rg.next_column().unwrap() {
        let c = descr.column(index);
        index += 1;
        let optional = c.max_def_level() > 0;
        let defs: Vec<i16> = (0..rows).map(|i| i16::from(i % 3 != 1)).collect();
        let present = |i: &usize| !optional || i % 3 != 1;
        let def_arg = optional.then_some(defs.as_slice());
        match c.physical_type() {
            parquet::basic::Type::INT64 => {
                let v: Vec<i64> = (0..rows).filter(present).map(|i| i as i64).collect();
                col.typed::<Int64Type>()
                    .write_batch(&v, def_arg, None)
                    .unwrap();
            }
            _ => {
                let v: Vec<ByteArray> = (0..rows)
                    .filter(present)
                    .map(|i| ByteArray::from(format!("x{i:04}").into_bytes()))
                    .collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&v, def_arg, None)
                    .unwrap();
            }
        }
        col.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
}

#[test]
fn the_command_line_exports_and_imports() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("db");
    let lines: String = (0..500).map(|i| format!("k{i:04}\tv{i}\n")).collect();
    let tsv = t.path().join("in.tsv");
    std::fs::write(&tsv, lines).unwrap();
    assert_eq!(store_cmd(&db, &["load", tsv.to_str().unwrap()]).code, 0);
    assert_eq!(store_cmd(&db, &["delete", "k0007"]).code, 0);
    let out = t.path().join("out");
    let o = store_cmd(
        &db,
        &[
            "export",
            "--parquet",
            out.to_str().unwrap(),
            "--rows-per-group",
            "100",
            "--rows-per-file",
            "250",
            "--fpp",
            "0.02",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.text().starts_with("exported 499 keys to ") && o.text().contains("2 files, 6 row groups"),
        "{}",
        o.text()
    );
    // A directory stands for its files; a string-typed column (UTF8) and a fixed-length one
    // are binary too.
    let db2 = t.path().join("db2");
    let o = store_cmd(&db2, &["import", "--parquet", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.text(), "imported 499 rows from 2 files\n");
    assert_eq!(
        store_cmd(&db2, &["scan"]).stdout,
        store_cmd(&db, &["scan"]).stdout
    );
    let strings = t.path().join("strings.parquet");
    write_foreign(
        &strings,
        "message m { required binary id (UTF8); required binary v (UTF8); }",
        50,
    );
    let db3 = t.path().join("db3");
    let o = store_cmd(
        &db3,
        &[
            "import",
            "--parquet",
            strings.to_str().unwrap(),
            "--key-column",
            "id",
            "--value-column",
            "v",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(store_cmd(&db3, &["get", "x0042"]).text(), "x0042\n");
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("db");
    assert_eq!(store_cmd(&db, &["put", "a", "1"]).code, 0);
    let out = t.path().join("out");
    assert_eq!(
        store_cmd(&db, &["export", "--parquet", out.to_str().unwrap()]).code,
        0
    );
    let good = interop::parquet_files(&out)[0].clone();
    let bytes = std::fs::read(&good).unwrap();
    let imp = |file: &Path, extra: &[&str]| {
        let mut args = vec!["import", "--parquet", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        store_cmd(&t.path().join("target"), &args)
    };

    // Export: no store; a directory that cannot be created; one that holds Parquet files.
    exit2(
        store_cmd(&t.path().join("none"), &["export", "--parquet", "x"]),
        "no store at",
    );
    let file = t.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    exit2(
        store_cmd(
            &db,
            &["export", "--parquet", file.join("sub").to_str().unwrap()],
        ),
        "cannot export",
    );
    exit2(
        store_cmd(&db, &["export", "--parquet", out.to_str().unwrap()]),
        "already holds .parquet files",
    );
    exit2(
        store_cmd(&db, &["export", "--parquet", "y", "--fpp", "1.5"]),
        "--fpp",
    );

    // Import: not Parquet, missing, truncated (footer gone, or a page cut), a missing
    // column, a non-binary column, a null value, a directory without Parquet files.
    let text = t.path().join("text.parquet");
    std::fs::write(&text, "key\tvalue\n").unwrap();
    exit2(imp(&text, &[]), "not a readable Parquet file");
    exit2(
        imp(&t.path().join("missing.parquet"), &[]),
        "missing.parquet",
    );
    let cut = t.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
    exit2(imp(&cut, &[]), "not a readable Parquet file");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    exit2(imp(&cut, &[]), "cut.parquet");
    exit2(
        imp(&good, &["--key-column", "id"]),
        "no column `id` (its columns: key, value)",
    );
    let ints = t.path().join("ints.parquet");
    write_foreign(
        &ints,
        "message m { required int64 key; required binary value; }",
        10,
    );
    exit2(imp(&ints, &[]), "column `key` holds INT64, not binary data");
    let empty_dir = t.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    exit2(imp(&empty_dir, &[]), "holds no .parquet file");
    // None of the refused imports created the target store.
    assert!(!t.path().join("target").join("MANIFEST").exists());
    // A refused import leaves an existing store as it was.
    exit2(
        store_cmd(&db, &["import", "--parquet", ints.to_str().unwrap()]),
        "INT64",
    );
    assert_eq!(store_cmd(&db, &["scan"]).text(), "a\t1\n");
    // A null is found while rows are loaded: the rows before it stay, and it exits 2.
    let nulls = t.path().join("nulls.parquet");
    write_foreign(
        &nulls,
        "message m { required binary key; optional binary value; }",
        10,
    );
    exit2(
        store_cmd(&db, &["import", "--parquet", nulls.to_str().unwrap()]),
        "row 1: `value` is null",
    );
    assert_eq!(store_cmd(&db, &["get", "x0000"]).text(), "x0000\n");
}

/// Files written by another engine: DuckDB's own row groups, dictionary pages, string
/// values and codecs import byte for byte; a codec this build does not read (zstd) is
/// refused before anything is written.
#[test]
fn files_written_by_duckdb_import() {
    let Some(python) = interop::python() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let script = interop::root().join("tests/interop/duckdb_write.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg(t.path())
        .args(["uncompressed", "snappy", "gzip", "lz4", "zstd"]);
    let (ok, _, stderr) = interop::run_with_timeout(cmd, Duration::from_secs(120));
    assert!(ok, "duckdb_write.py failed: {stderr}");
    let want: String = (0..1000)
        .map(|i| format!("k{i:04}\tvalue of k{i:04}\n"))
        .collect();
    for codec in ["uncompressed", "snappy", "gzip", "lz4"] {
        let db = t.path().join(format!("db-{codec}"));
        let file = t.path().join(format!("duckdb-{codec}.parquet"));
        let o = store_cmd(&db, &["import", "--parquet", file.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{codec}: {}", o.stderr);
        assert_eq!(o.text(), "imported 1000 rows from 1 files\n");
        assert_eq!(store_cmd(&db, &["scan"]).text(), want, "{codec}");
    }
    let db = t.path().join("db-zstd");
    let file = t.path().join("duckdb-zstd.parquet");
    exit2(
        store_cmd(&db, &["import", "--parquet", file.to_str().unwrap()]),
        "compressed with ZSTD, which this build does not read",
    );
    assert!(!db.join("MANIFEST").exists());
}
