//! The row groups of an export read back with the parquet crate (key ranges and Bloom
//! filters), and the groups a reader that applies them would read.

use std::fs::File;
use std::path::Path;

use parquet::bloom_filter::Sbbf;
use parquet::errors::ParquetError;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};

use super::FppRow;
use filterstore::export::ExportSummary;
use filterstore::{Error, Result};

/// The row groups of an export with their key ranges and filters, read back.
/// A row group's min key, max key and Bloom filter.
type Group = (Vec<u8>, Vec<u8>, Option<Sbbf>);

/// A parquet crate error reading back `file`, as the library's error naming the file.
fn pq_err(file: &Path) -> impl Fn(ParquetError) -> Error + '_ {
    move |e| Error::Parquet {
        file: file.to_path_buf(),
        reason: e.to_string(),
    }
}

fn read_groups(summary: &ExportSummary) -> Result<Vec<Group>> {
    let mut out = Vec::new();
    for f in &summary.files {
        let props = ReaderProperties::builder()
            .set_read_bloom_filter(true)
            .build();
        let file = File::open(&f.path).map_err(|e| Error::io(&f.path, e))?;
        let r = SerializedFileReader::new_with_options(
            file,
            ReadOptionsBuilder::new()
                .with_reader_properties(props)
                .build(),
        )
        .map_err(pq_err(&f.path))?;
        for (i, g) in f.groups.iter().enumerate() {
            let rg = r.get_row_group(i).map_err(pq_err(&f.path))?;
            out.push((
                g.min_key.clone(),
                g.max_key.clone(),
                rg.get_column_bloom_filter(0).cloned(),
            ));
        }
    }
    Ok(out)
}

pub(super) fn count_reads(
    summary: &ExportSummary,
    absent: &[[u8; 16]],
    present: &[(u64, [u8; 16])],
) -> Result<FppRow> {
    let groups = read_groups(summary)?;
    let mut row = FppRow {
        files: summary.files.len(),
        groups: groups.len(),
        file_bytes: summary.file_bytes(),
        bloom_bytes: summary.bloom_bytes(),
        model_fpr: summary.groups().filter_map(|g| g.bloom_fpr).sum::<f64>()
            / summary.groups().count().max(1) as f64,
        absent: absent.len() as u64,
        present: present.len() as u64,
        ..FppRow::default()
    };
    fn in_range<'a>(groups: &'a [Group], k: &'a [u8]) -> impl Iterator<Item = &'a Group> + 'a {
        groups
            .iter()
            .filter(move |g| g.0.as_slice() <= k && k <= g.1.as_slice())
    }
    for k in absent {
        for g in in_range(&groups, k) {
            row.absent_in_range += 1;
            row.absent_read += u64::from(g.2.as_ref().is_none_or(|f| f.check(&k[..])));
        }
    }
    for (_, k) in present {
        row.present_found +=
            u64::from(in_range(&groups, k).any(|g| g.2.as_ref().is_none_or(|f| f.check(&k[..]))));
    }
    Ok(row)
}
