"""Point queries on an exported directory through Apache Spark (pyspark, local mode).

Not part of CI (a JVM and a 300 MB wheel); run by hand as docs/scale-out.md says.

Usage: spark.py DIR QUERIES

QUERIES as for engines.py (`KIND HEX MODES`); every key is asked with parquet-mr's Bloom
filters on (`parquet.filter.bloom.enabled = true`, the default) and off. Prints per key
and mode:

  spark MODE HEX rows_scanned=N value=V

N: rows the Parquet scan produced (the rows of the row groups it read; min/max statistics
and, when on, the Bloom filters skip the others), V: the value returned in hex or `-`.
"""

import sys

from pyspark.sql import SparkSession


def main():
    directory, queries = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.parquet.filterPushdown", "true")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    spark.read.parquet(directory).createOrReplaceTempView("t")
    print(f"# spark {spark.version}", flush=True)
    with open(queries) as lines:
        keys = [line.split()[1] for line in lines]
    for mode in ("on", "off"):
        hadoop.set("parquet.filter.bloom.enabled", "true" if mode == "on" else "false")
        for key_hex in keys:
            df = spark.sql(f"SELECT value FROM t WHERE key = X'{key_hex}'")
            values = [bytes(r[0]).hex() for r in df.collect()]
            plan = df._jdf.queryExecution().executedPlan()
            scan = plan.collectLeaves().head()
            rows = scan.metrics().apply("numOutputRows").value()
            print(f"spark {mode} {key_hex} rows_scanned={rows} value={'+'.join(values) or '-'}")
    sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    main()
