//! A small full-text index in two keyspaces: `docs` holds each document, `postings` one key
//! per (word, document). Adding, changing or removing a document updates both in one
//! `WriteBatch`: after a crash the index holds the document's postings exactly when it
//! holds the document.
//!
//! `cargo run --example index`

use filterstore::{Keyspace, Result, Store, WriteBatch};

fn words(text: &str) -> Vec<String> {
    let mut w: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    w.sort();
    w.dedup();
    w
}

fn posting(word: &str, doc: &str) -> String {
    format!("{word}\0{doc}")
}

/// Sets document `id` to `text` (`None`: removes it), its postings with it, atomically.
fn set(
    store: &Store,
    docs: &Keyspace,
    postings: &Keyspace,
    id: &str,
    text: Option<&str>,
) -> Result<()> {
    let mut batch = WriteBatch::new();
    if let Some(old) = docs.get(id)? {
        for w in words(&String::from_utf8_lossy(&old)) {
            batch.delete_in(postings, posting(&w, id));
        }
    }
    match text {
        Some(t) => {
            batch.put_in(docs, id, t);
            for w in words(t) {
                batch.put_in(postings, posting(&w, id), "");
            }
        }
        None => {
            batch.delete_in(docs, id);
        }
    }
    store.write(batch)
}

/// The documents that hold `word`, by a prefix scan of the postings.
fn search(postings: &Keyspace, word: &str) -> Result<Vec<String>> {
    let prefix = format!("{}\0", word.to_lowercase());
    postings
        .scan_prefix(prefix.as_bytes())
        .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k[prefix.len()..]).into_owned()))
        .collect()
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), Default::default())?;
    let docs = store.keyspace("docs")?;
    let postings = store.keyspace("postings")?;
    set(&store, &docs, &postings, "d1", Some("The quick brown fox"))?;
    set(&store, &docs, &postings, "d2", Some("A quick brown dog"))?;
    set(&store, &docs, &postings, "d3", Some("Lazy dogs sleep"))?;
    println!("quick: {:?}", search(&postings, "quick")?);
    set(&store, &docs, &postings, "d1", Some("The slow red fox"))?;
    set(&store, &docs, &postings, "d2", None)?;
    println!("quick after the edits: {:?}", search(&postings, "quick")?);
    println!("fox: {:?}", search(&postings, "fox")?);
    assert_eq!(search(&postings, "quick")?, Vec::<String>::new());
    assert_eq!(search(&postings, "fox")?, ["d1"]);
    // A snapshot of the store reads both keyspaces at one instant.
    let snap = store.snapshot();
    set(&store, &docs, &postings, "d1", None)?;
    let then = snap.keyspace(&postings)?;
    println!("fox in the snapshot: {:?}", search_in(&then, "fox")?);
    println!("fox now: {:?}", search(&postings, "fox")?);
    for s in store.keyspace_stats() {
        println!(
            "keyspace {:?}: {} entries in memory",
            s.name, s.memtable_entries
        );
    }
    Ok(())
}

fn search_in(snap: &filterstore::Snapshot, word: &str) -> Result<Vec<String>> {
    let prefix = format!("{}\0", word.to_lowercase());
    snap.scan_prefix(prefix.as_bytes())
        .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k[prefix.len()..]).into_owned()))
        .collect()
}
