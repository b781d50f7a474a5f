//! `stats`: store-wide and per-table figures, as text or as JSON.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use filterstore::Store;

use super::{rate, stdout, Access, CliError, Exit, Global, Run};

/// Print store-wide and per-table figures: tables, keys, bytes, filter kind, ε, bits per
/// key, filter bytes, and the lookup counters.
///
/// The counters (lookups, filter negatives/positives, false positives, observed FPR,
/// data-block reads) count what this process did since it opened the store, so a fresh
/// `store stats` always shows 0 lookups; they are meaningful to library users and the
/// benchmark, and are printed for completeness.
///
/// --json prints one JSON object. Keys (min_key, max_key) are given twice: as a JSON
/// string when the key is valid UTF-8 (null otherwise) and always as lowercase hex
/// (min_key_hex, max_key_hex). Rates that do not exist yet (observed FPR before any
/// probe) are null.
#[derive(Args, Debug)]
pub struct Stats {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

impl Run for Stats {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        let text = if self.json {
            json(&store, g)
        } else {
            text(&store, g)
        };
        let mut out = stdout();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(Exit::Success)
    }
}

fn text(store: &Store, g: &Global) -> String {
    let s = store.stats();
    let (kind, fpr) = store.default_filter();
    let mut o = String::new();
    let file_bytes: u64 = s.tables.iter().map(|t| t.file_bytes).sum();
    let filter_bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
    let tombstones: u64 = s.tables.iter().map(|t| t.tombstones).sum();
    let _ = writeln!(o, "store:          {}", g.dir().display());
    let _ = writeln!(
        o,
        "default filter: {kind}, fpr {} (chosen at creation)",
        rate(fpr)
    );
    let _ = writeln!(
        o,
        "tables:         {} ({} keys incl. {} tombstones, {} table bytes, {} filter bytes)",
        s.tables.len(),
        s.table_keys(),
        tombstones,
        file_bytes,
        filter_bytes
    );
    let _ = writeln!(
        o,
        "memtable:       {} entries (not yet in a table)",
        s.memtable_entries
    );
    let _ = writeln!(
        o,
        "counters:       this process only, so 0 lookups in a fresh `store stats`:"
    );
    let _ = writeln!(
        o,
        "                lookups {}, filter negatives {}, filter positives {}, \
         false positives {}, observed FPR {}, data-block reads {}",
        s.lookups,
        s.filter_negatives,
        s.filter_positives,
        s.false_positives,
        s.observed_fpr()
            .map_or("-".to_string(), |f| format!("{f:.6}")),
        s.data_block_reads
    );
    if !s.tables.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>6}  {:<13}  {:>8}  {:>9}  {:>10}  {:>11}  {:>12}  {:>8}  {:>10}  key range",
            "table",
            "filter",
            "fpr",
            "keys",
            "tombstones",
            "file bytes",
            "filter bytes",
            "bits/key",
            "theor. FPR"
        );
    }
    for t in &s.tables {
        let _ = writeln!(
            o,
            "{:>06}  {:<13}  {:>8}  {:>9}  {:>10}  {:>11}  {:>12}  {:>8.2}  {:>10.3e}  {} .. {}",
            t.number,
            t.filter_kind.name(),
            rate(t.target_fpr),
            t.keys,
            t.tombstones,
            t.file_bytes,
            t.filter_bytes,
            t.bits_per_key(),
            t.theoretical_fpr,
            show_key(&t.min_key),
            show_key(&t.max_key)
        );
        if let Some(p) = &t.filter_problem {
            let _ = writeln!(o, "        filter not in use: {p}");
        }
    }
    o
}

/// A key for a terminal: printable UTF-8 as is, the rest escaped (`\t`, `\u{1b}`, `\xff`).
fn show_key(k: &[u8]) -> String {
    let mut s = String::new();
    for chunk in k.utf8_chunks() {
        s.extend(chunk.valid().escape_debug());
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

fn json(store: &Store, g: &Global) -> String {
    let s = store.stats();
    let (kind, fpr) = store.default_filter();
    let file_bytes: u64 = s.tables.iter().map(|t| t.file_bytes).sum();
    let filter_bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
    let tombstones: u64 = s.tables.iter().map(|t| t.tombstones).sum();
    let mut o = String::from("{\n");
    let _ = writeln!(
        o,
        "  \"dir\": {},",
        json_str(g.dir().to_string_lossy().as_bytes())
    );
    let _ = writeln!(
        o,
        "  \"default_filter\": {{\"kind\": \"{kind}\", \"fpr\": {}}},",
        json_f64(fpr)
    );
    let _ = writeln!(o, "  \"table_count\": {},", s.tables.len());
    let _ = writeln!(o, "  \"keys\": {},", s.table_keys());
    let _ = writeln!(o, "  \"tombstones\": {tombstones},");
    let _ = writeln!(o, "  \"file_bytes\": {file_bytes},");
    let _ = writeln!(o, "  \"filter_bytes\": {filter_bytes},");
    let _ = writeln!(o, "  \"memtable_entries\": {},", s.memtable_entries);
    let _ = writeln!(o, "  \"memtable_bytes\": {},", s.memtable_bytes);
    let _ = writeln!(
        o,
        "  \"counters\": {{\"scope\": \"this process\", \"lookups\": {}, \
         \"filter_negatives\": {}, \"filter_positives\": {}, \"false_positives\": {}, \
         \"observed_fpr\": {}, \"unfiltered_reads\": {}, \"data_block_reads\": {}, \
         \"bytes_read\": {}}},",
        s.lookups,
        s.filter_negatives,
        s.filter_positives,
        s.false_positives,
        s.observed_fpr().map_or("null".into(), json_f64),
        s.unfiltered_reads,
        s.data_block_reads,
        s.bytes_read
    );
    o.push_str("  \"tables\": [");
    for (i, t) in s.tables.iter().enumerate() {
        o.push_str(if i == 0 { "\n" } else { ",\n" });
        let _ = write!(
            o,
            "    {{\"number\": {}, \"filter_kind\": \"{}\", \"target_fpr\": {}, \"keys\": {}, \
             \"tombstones\": {}, \"file_bytes\": {}, \"filter_bytes\": {}, \
             \"bits_per_key\": {}, \"theoretical_fpr\": {}, \"observed_fpr\": {}, \
             \"filter_negatives\": {}, \"false_positives\": {}, \"data_block_reads\": {}, \
             \"min_key\": {}, \"min_key_hex\": \"{}\", \"max_key\": {}, \
             \"max_key_hex\": \"{}\", \"filter_problem\": {}}}",
            t.number,
            t.filter_kind.name(),
            json_f64(t.target_fpr),
            t.keys,
            t.tombstones,
            t.file_bytes,
            t.filter_bytes,
            json_f64(t.bits_per_key()),
            json_f64(t.theoretical_fpr),
            t.observed_fpr().map_or("null".into(), json_f64),
            t.filter_negatives,
            t.false_positives,
            t.data_block_reads,
            json_key(&t.min_key),
            hex(&t.min_key),
            json_key(&t.max_key),
            hex(&t.max_key),
            t.filter_problem
                .as_deref()
                .map_or("null".into(), |p| json_str(p.as_bytes())),
        );
    }
    o.push_str(if s.tables.is_empty() {
        "]\n}\n"
    } else {
        "\n  ]\n}\n"
    });
    o
}

/// A JSON number, or `null` for NaN and infinities (which JSON cannot express).
fn json_f64(x: f64) -> String {
    if x.is_finite() {
        rate(x)
    } else {
        "null".into()
    }
}

/// A key as a JSON string when it is UTF-8, else `null` (the hex field always has it).
fn json_key(k: &[u8]) -> String {
    match std::str::from_utf8(k) {
        Ok(_) => json_str(k),
        Err(_) => "null".into(),
    }
}

/// A quoted, escaped JSON string of UTF-8 `bytes` (invalid bytes become U+FFFD).
fn json_str(bytes: &[u8]) -> String {
    let mut o = String::from("\"");
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
