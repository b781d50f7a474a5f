//! Word lists: one word per line, plain or gzip-compressed.

use std::io::Read;
use std::path::Path;

use filterstore::{Error, Result};

/// The built-in English word list (dwyl/english-words, 466,551 lines, Unlicense), gzip.
static BUILTIN_WORDS_GZ: &[u8] = include_bytes!("../../data/words/words.txt.gz");

/// A word list held in one buffer (one allocation for the text, one for the offsets).
#[derive(Debug, Clone, Default)]
pub struct WordList {
    text: String,
    /// `ends[i]` is the end of word `i` in `text`; word `i` starts at `ends[i - 1]` (or 0).
    ends: Vec<usize>,
}

impl WordList {
    /// The built-in list, decompressed at run time (466,551 words).
    pub fn builtin() -> Result<WordList> {
        WordList::from_gzip(BUILTIN_WORDS_GZ)
            .map_err(|e| e.in_file("cli/data/words/words.txt.gz (built in)", 0))
    }

    /// Reads a list from a file; a name ending in `.gz` is decompressed.
    pub fn from_path(path: &Path) -> Result<WordList> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let gz = path.extension().is_some_and(|x| x == "gz");
        let list = if gz {
            WordList::from_gzip(&bytes)
        } else {
            String::from_utf8(bytes)
                .map_err(|e| Error::corrupt(e.utf8_error().valid_up_to() as u64, "not UTF-8"))
                .map(|t| WordList::from_text(&t))
        };
        list.map_err(|e| e.in_file(path, 0))
    }

    /// Decompresses a gzip buffer holding one word per line (UTF-8).
    pub fn from_gzip(gz: &[u8]) -> Result<WordList> {
        let mut text = String::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_string(&mut text)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    Error::corrupt(0, format!("bad gzip word list: {e}"))
                } else {
                    Error::from(e)
                }
            })?;
        Ok(WordList::from_text(&text))
    }

    /// Splits text into lines (`\n` or `\r\n`); every line is a word, empty ones included
    /// except an empty last line.
    pub fn from_text(text: &str) -> WordList {
        let mut list = WordList {
            text: String::with_capacity(text.len()),
            ends: Vec::new(),
        };
        for line in text.lines() {
            list.push(line);
        }
        list
    }

    /// Appends a word.
    pub fn push(&mut self, word: &str) {
        self.text.push_str(word);
        self.ends.push(self.text.len());
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no word.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Word `i`, if any.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    /// The words in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let w = &self.text[start..end];
            start = end;
            w
        })
    }

    /// Total bytes of all words.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines() {
        let l = WordList::from_text("a\r\nbc\n\nd");
        assert_eq!(l.iter().collect::<Vec<_>>(), vec!["a", "bc", "", "d"]);
        assert_eq!(l.get(1), Some("bc"));
        assert_eq!(l.get(4), None);
        assert!(WordList::from_gzip(b"not gzip").is_err());
    }
}
