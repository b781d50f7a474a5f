//! Times the decoding of data blocks alone, per codec: a table of 20,000 entries like
//! `store bench engine --value-compressibility 0.5` writes (16-byte random keys, 100-byte
//! values of 50 random printable bytes repeated) is written once per codec, and every stored
//! block is decoded (checked claim, decompression into a reused buffer) over and over; prints
//! the bytes as stored and the best of several passes in ns per block.
//!
//! `cargo run --release -p filterstore-tools --bin block_decode [passes]`

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::io::RealFs;
use filterstore::table::{compress, write_table, Table};
use filterstore::Compression;

fn main() -> filterstore::Result<()> {
    let passes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let mut x = 1u64;
    let mut entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..20_000u64)
        .map(|i| {
            let key = [mix64(i).to_be_bytes(), mix64(!i).to_be_bytes()].concat();
            let mut v: Vec<u8> = (0..50)
                .map(|_| {
                    x = mix64(x.wrapping_add(0x9e37_79b9_7f4a_7c15));
                    b' ' + (x % 95) as u8
                })
                .collect();
            v.extend_from_within(..);
            (key, Some(v))
        })
        .collect();
    entries.sort();
    let view: Vec<(&[u8], Option<&[u8]>)> = entries
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let tmp = tempfile::tempdir()?;
    for codec in Compression::ALL.into_iter().filter(|c| c.is_available()) {
        let path = tmp.path().join(format!("{codec}.sst"));
        write_table(&RealFs, &path, view.as_slice(), codec)?;
        let bytes = std::fs::read(&path).map_err(|e| filterstore::Error::io(&path, e))?;
        let table = Table::open(&path, false)?;
        let blocks: Vec<&[u8]> = (0..table.block_count())
            .filter_map(|i| table.block_span(i))
            .map(|(off, len)| &bytes[off as usize..(off + u64::from(len)) as usize])
            .collect();
        let mut buf = Vec::new();
        let mut best = f64::MAX;
        let mut out = 0usize;
        for _ in 0..passes {
            out = 0;
            let t = Instant::now();
            for b in &blocks {
                out += compress::decode(b, 0, &mut buf)?.len();
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        if codec == Compression::Lz4 {
            // The prefix decoder: whole blocks, then the first half of each.
            for (what, part) in [("whole", 1usize), ("first half", 2)] {
                let mut best = f64::MAX;
                for _ in 0..passes {
                    let t = Instant::now();
                    for b in &blocks {
                        let (body, tag) = b.split_at(b.len() - 1);
                        if tag[0] != 1 && tag[0] != 3 {
                            continue;
                        }
                        let (mut d, n) = compress::Lz4Prefix::new(body, 0)?;
                        if buf.len() < n {
                            buf.resize(n, 0);
                        }
                        d.fill(&mut buf[..n], n / part)?;
                        std::hint::black_box(d.decoded());
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                println!(
                    "lz4 prefix decoder, {what}: best of {passes}: {:.0} ns per block",
                    best * 1e9 / blocks.len() as f64
                );
            }
        }
        println!(
            "{codec}: {} blocks, {} bytes as stored for {out} ({:.3}), best of {passes}: {:.0} ns per block",
            blocks.len(),
            table.meta.stored_data_bytes,
            table.meta.stored_data_bytes as f64 / table.meta.data_bytes as f64,
            best * 1e9 / blocks.len() as f64
        );
    }
    Ok(())
}
