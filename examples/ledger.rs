//! An account ledger in two keyspaces: `balances` holds each account's balance, `history`
//! one entry per transfer and account (`account/000042`), newest last. A transfer is one
//! transaction across both keyspaces: it reads the two balances, refuses an overdraft, and
//! writes both balances and both history entries at once, or nothing if another transfer
//! touched the same accounts in between (then it runs again). Four threads transfer at
//! random; the total never changes, and each account's history adds up to its balance.
//!
//! `cargo run --example ledger`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use filterstore::{Error, Keyspace, Result, Store, Transaction};

const ACCOUNTS: u64 = 20;
const OPENING: i64 = 1_000;

fn account(i: u64) -> String {
    format!("acct{i:02}")
}

fn number(v: &[u8]) -> i64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// The ledger's two keyspaces.
#[derive(Clone)]
struct Ledger {
    store: Store,
    balances: Keyspace,
    history: Keyspace,
}

impl Ledger {
    fn open(store: Store) -> Result<Ledger> {
        let balances = store.keyspace("balances")?;
        let history = store.keyspace("history")?;
        Ok(Ledger {
            store,
            balances,
            history,
        })
    }

    /// Appends `amount` to the history of `acct` in `tx`, after its last entry.
    fn note(&self, tx: &mut Transaction, acct: &str, amount: i64) -> Result<()> {
        // The newest entry of the account: one step of a reverse prefix scan.
        let prefix = format!("{acct}/");
        let last = tx
            .scan_prefix_in(&self.history, &prefix)?
            .next_back()
            .transpose()?;
        let next = last.map_or(0, |(k, _)| number(&k[prefix.len()..]) + 1);
        tx.put_in(
            &self.history,
            format!("{prefix}{next:06}"),
            amount.to_string(),
        );
        Ok(())
    }

    /// Moves `amount` from `from` to `to`; `Ok(false)` when `from` has too little.
    fn transfer(&self, from: &str, to: &str, amount: i64) -> Result<bool> {
        loop {
            let mut tx = self.store.transaction();
            let a = tx.get_in(&self.balances, from)?.map_or(0, |v| number(&v));
            if a < amount {
                return Ok(false);
            }
            let b = tx.get_in(&self.balances, to)?.map_or(0, |v| number(&v));
            tx.put_in(&self.balances, from, (a - amount).to_string());
            tx.put_in(&self.balances, to, (b + amount).to_string());
            self.note(&mut tx, from, -amount)?;
            self.note(&mut tx, to, amount)?;
            match tx.commit() {
                Ok(()) => return Ok(true),
                // Another transfer touched these accounts since this one began: again.
                Err(Error::Conflict) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ledger = Ledger::open(Store::open(dir.path(), Default::default())?)?;
    for i in 0..ACCOUNTS {
        let mut tx = ledger.store.transaction();
        tx.put_in(&ledger.balances, account(i), OPENING.to_string());
        ledger.note(&mut tx, &account(i), OPENING)?;
        tx.commit()?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (ledger, done) = (ledger.clone(), done.clone());
            std::thread::spawn(move || -> Result<()> {
                let mut x = t + 1;
                for _ in 0..500 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (from, to) = ((x >> 33) % ACCOUNTS, (x >> 45) % ACCOUNTS);
                    if from != to
                        && ledger.transfer(&account(from), &account(to), (x >> 20) as i64 % 300)?
                    {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap()?;
    }
    // One snapshot reads both keyspaces at one instant.
    let snap = ledger.store.snapshot();
    let balances = snap.keyspace(&ledger.balances)?;
    let history = snap.keyspace(&ledger.history)?;
    let mut total = 0;
    for i in 0..ACCOUNTS {
        let acct = account(i);
        let balance = number(&balances.get(&acct)?.unwrap());
        let entries: i64 = history
            .scan_prefix(format!("{acct}/"))
            .map(|r| r.map(|(_, v)| number(&v)))
            .sum::<Result<i64>>()?;
        assert_eq!(
            entries, balance,
            "{acct}: its history adds up to its balance"
        );
        total += balance;
    }
    assert_eq!(
        total,
        OPENING * ACCOUNTS as i64,
        "money is neither made nor lost"
    );
    println!(
        "{} transfers between {ACCOUNTS} accounts; total {total}",
        done.load(Ordering::Relaxed)
    );
    let latest: Vec<String> = history
        .scan_prefix("acct00/")
        .rev()
        .take(3)
        .map(|r| r.map(|(k, v)| format!("{} {}", String::from_utf8_lossy(&k), number(&v))))
        .collect::<Result<_>>()?;
    println!("acct00's latest entries: {latest:?}");
    Ok(())
}
