//! [`Slice`]: the bytes a read returns, shared with where they were found instead of copied.
//!
//! A value found in a block of the block cache, in the memtable or (`mmap_reads`, a block
//! stored raw) in a mapped table is returned as a refcounted view of those bytes: no
//! allocation, no copy of its bytes, one atomic increment. Short byte strings (up to
//! [`Slice::INLINE`] bytes: most keys, short values) are instead copied into the `Slice`
//! itself, which costs no allocation either and pins nothing. See docs/engine.md, "Values
//! without a copy", for what a held `Slice` keeps alive.
//!
//! Unsafe code: a union of the inline bytes and the shared `Bytes`, told apart by one word.

#![allow(unsafe_code)]

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::mem::ManuallyDrop;
use std::ops::{Deref, Range};

use bytes::Bytes;

/// Bytes returned by a read (a value of `get`, a key and value of a scan): cheap to clone,
/// derefs to `[u8]`, compares, orders and hashes as `[u8]`.
///
/// Up to [`Slice::INLINE`] bytes are held inline (no allocation, nothing pinned); a longer
/// one shares the bytes it was read from: a block of the block cache, a 1 MiB chunk of the
/// memtable's arena, or a mapped table file (with `mmap_reads`), which it keeps alive until
/// it and every clone drop. Call [`to_vec`](slice::to_vec) (or `Vec::from`) for an owned
/// copy that pins nothing.
///
/// ```
/// use filterstore::Slice;
/// let s = Slice::from("apple");
/// assert_eq!(s, b"apple");
/// assert_eq!(&s[..2], b"ap");
/// assert_eq!(Vec::from(s.clone()), b"apple".to_vec());
/// assert_eq!(format!("{s:?}"), r#"b"apple""#);
/// ```
///
/// [`to_vec`]: https://doc.rust-lang.org/std/primitive.slice.html#method.to_vec
pub struct Slice {
    body: Body,
    /// The inline length, or [`SHARED`] when `body` holds a [`Bytes`]. One word, written
    /// and read whole: a `Slice` is moved as whole 16- and 8-byte words that line up with
    /// its fields (`body`'s two halves, then `meta`), so a move never reloads bytes just
    /// stored in smaller pieces (a store-forwarding stall on every move of a scan item;
    /// a 38-byte inline array beside one-byte tags cost 4–5 such stalls per item).
    meta: u64,
}

/// The bytes held inline, or the shared owner's view; [`Slice::meta`] says which.
union Body {
    inline: [u8; Slice::INLINE],
    shared: ManuallyDrop<Bytes>,
}

/// [`Slice::meta`] of a shared slice.
const SHARED: u64 = u64::MAX;

// A `Slice` is a `Bytes` (which is `Send + Sync`) or plain bytes.
unsafe impl Send for Slice {}
unsafe impl Sync for Slice {}

impl Slice {
    /// The longest byte string held inline (copied into the `Slice`, no allocation).
    pub const INLINE: usize = 32;

    /// An empty slice.
    pub const fn new() -> Slice {
        Slice {
            body: Body {
                inline: [0; Slice::INLINE],
            },
            meta: 0,
        }
    }

    /// A slice sharing `b` (whatever its length).
    #[inline]
    fn shared(b: Bytes) -> Slice {
        Slice {
            body: Body {
                shared: ManuallyDrop::new(b),
            },
            meta: SHARED,
        }
    }

    /// The shared owner's view, if this slice is shared.
    #[inline]
    fn as_shared(&self) -> Option<&Bytes> {
        // SAFETY: `meta` says which field of the union was written.
        (self.meta == SHARED).then(|| unsafe { &*self.body.shared })
    }

    /// `bytes` copied inline, if short enough.
    #[inline]
    fn inline(bytes: &[u8]) -> Option<Slice> {
        if bytes.len() > Slice::INLINE {
            return None;
        }
        let mut s = Slice::new();
        s.meta = bytes.len() as u64;
        // SAFETY: `inline` is the field of a slice whose `meta` is not `SHARED`.
        unsafe { s.body.inline[..bytes.len()].copy_from_slice(bytes) };
        Some(s)
    }

    /// `shared[range]`: inline when short (a copy), else a view sharing `shared`'s owner (a
    /// refcount increment, no allocation when `shared` is already shared, as the block
    /// cache's blocks, the arena's chunks and the mapped tables are). `range` lies in
    /// `shared` (checked by the callers; out of range panics).
    #[inline]
    pub(crate) fn share(shared: &Bytes, range: Range<usize>) -> Slice {
        match Slice::inline(&shared[range.clone()]) {
            Some(s) => s,
            None => Slice::shared(shared.slice(range)),
        }
    }

    /// `part`, which lies in this slice's bytes, as a slice of its own: sharing the same
    /// owner (no copy) or inline when short.
    #[inline]
    pub(crate) fn sub(&self, part: &[u8]) -> Slice {
        match self.as_shared() {
            Some(b) => {
                let at = part.as_ptr() as usize - b.as_ptr() as usize;
                Slice::share(b, at..at + part.len())
            }
            None => Slice::from(part),
        }
    }

    /// Whether this slice shares another owner's bytes (false: held inline).
    pub fn is_shared(&self) -> bool {
        self.meta == SHARED
    }

    /// The slice as a `Bytes`: shared bytes handed over as they are, inline ones copied.
    fn into_bytes(self) -> Result<Bytes, Slice> {
        if self.meta != SHARED {
            return Err(self);
        }
        let mut me = ManuallyDrop::new(self);
        // SAFETY: shared (checked), and `me` is never dropped, so the `Bytes` moves out once.
        Ok(unsafe { ManuallyDrop::take(&mut me.body.shared) })
    }
}

impl Clone for Slice {
    #[inline]
    fn clone(&self) -> Slice {
        match self.as_shared() {
            Some(b) => Slice::shared(b.clone()),
            // SAFETY: not shared, so `inline` holds the bytes (plain data, copied).
            None => Slice {
                body: Body {
                    inline: unsafe { self.body.inline },
                },
                meta: self.meta,
            },
        }
    }
}

impl Drop for Slice {
    #[inline]
    fn drop(&mut self) {
        if self.meta == SHARED {
            // SAFETY: shared, and dropped once (here).
            unsafe { ManuallyDrop::drop(&mut self.body.shared) }
        }
    }
}

impl Default for Slice {
    fn default() -> Slice {
        Slice::new()
    }
}

impl Deref for Slice {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self.as_shared() {
            Some(b) => b,
            // SAFETY: not shared, so `inline` holds `meta` bytes (at most `INLINE`).
            None => unsafe { &self.body.inline[..self.meta as usize] },
        }
    }
}

impl AsRef<[u8]> for Slice {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Borrow<[u8]> for Slice {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for Slice {
    /// As a byte string literal: `b"abc\x00"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"")?;
        for &b in self.iter() {
            for c in std::ascii::escape_default(b) {
                write!(f, "{}", c as char)?;
            }
        }
        write!(f, "\"")
    }
}

impl PartialEq for Slice {
    #[inline]
    fn eq(&self, other: &Slice) -> bool {
        **self == **other
    }
}

impl Eq for Slice {}

impl PartialOrd for Slice {
    fn partial_cmp(&self, other: &Slice) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Slice {
    fn cmp(&self, other: &Slice) -> Ordering {
        (**self).cmp(&**other)
    }
}

impl Hash for Slice {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

macro_rules! eq_bytes {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Slice {
            #[inline]
            fn eq(&self, other: &$t) -> bool {
                **self == *AsRef::<[u8]>::as_ref(other)
            }
        }
        impl PartialEq<Slice> for $t {
            #[inline]
            fn eq(&self, other: &Slice) -> bool {
                *AsRef::<[u8]>::as_ref(self) == **other
            }
        }
    )*};
}

eq_bytes!([u8], &[u8], Vec<u8>, str, &str);

impl<const N: usize> PartialEq<[u8; N]> for Slice {
    #[inline]
    fn eq(&self, other: &[u8; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Slice {
    #[inline]
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<Slice> for [u8; N] {
    #[inline]
    fn eq(&self, other: &Slice) -> bool {
        self[..] == **other
    }
}

impl From<&[u8]> for Slice {
    /// Inline when short, else a copy in a shared allocation of its own.
    fn from(bytes: &[u8]) -> Slice {
        Slice::inline(bytes).unwrap_or_else(|| Slice::shared(Bytes::copy_from_slice(bytes)))
    }
}

impl<const N: usize> From<&[u8; N]> for Slice {
    fn from(bytes: &[u8; N]) -> Slice {
        Slice::from(&bytes[..])
    }
}

impl From<Vec<u8>> for Slice {
    /// Inline when short (the vector is dropped), else takes the vector without a copy.
    fn from(v: Vec<u8>) -> Slice {
        Slice::inline(&v).unwrap_or_else(|| Slice::shared(Bytes::from(v)))
    }
}

impl From<&str> for Slice {
    fn from(s: &str) -> Slice {
        Slice::from(s.as_bytes())
    }
}

impl From<String> for Slice {
    fn from(s: String) -> Slice {
        Slice::from(s.into_bytes())
    }
}

impl From<Bytes> for Slice {
    /// Inline when short, else shares `b` (a refcount; a `Bytes` made from a `Vec` and
    /// never cloned allocates its shared header once, on the first clone).
    fn from(b: Bytes) -> Slice {
        Slice::inline(&b).unwrap_or_else(|| Slice::shared(b))
    }
}

impl From<Slice> for Vec<u8> {
    fn from(s: Slice) -> Vec<u8> {
        match s.into_bytes() {
            Ok(b) => Vec::from(b),
            Err(inline) => inline.to_vec(),
        }
    }
}

impl From<Slice> for Bytes {
    /// Shared bytes are handed over as they are (no copy); inline ones are copied.
    fn from(s: Slice) -> Bytes {
        s.into_bytes()
            .unwrap_or_else(|inline| Bytes::copy_from_slice(&inline))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_forms() {
        assert!(std::mem::size_of::<Slice>() <= 40);
        let short = Slice::from(&[7u8; Slice::INLINE][..]);
        assert!(!short.is_shared());
        let long = Slice::from(&[7u8; Slice::INLINE + 1][..]);
        assert!(long.is_shared());
        assert_eq!(short.len(), Slice::INLINE);
        assert_eq!(long.len(), Slice::INLINE + 1);
        let block = Bytes::from_owner(vec![1u8; 100]);
        let v = Slice::share(&block, 10..90);
        assert!(v.is_shared());
        assert_eq!(v.as_ptr(), block[10..].as_ptr(), "a view, not a copy");
        assert!(!Slice::share(&block, 0..3).is_shared());
    }

    #[test]
    fn compares_as_bytes() {
        let a = Slice::from("abc");
        let b = Slice::from(vec![b'a'; 50]);
        assert!(a != b);
        assert_eq!(a.cmp(&b), b"abc"[..].cmp(&[b'a'; 50][..]));
        assert_eq!(a, *b"abc");
        assert_eq!(a, b"abc");
        assert_eq!(a, "abc");
        assert_eq!(a, b"abc".to_vec());
        assert_eq!(b"abc".to_vec(), a);
        assert_eq!(a, &b"abc"[..]);
        assert_eq!(Slice::new(), Slice::default());
        assert!(Slice::new().is_empty());
        assert_eq!(Vec::from(b.clone()), vec![b'a'; 50]);
        assert_eq!(Bytes::from(a.clone()), Bytes::from_static(b"abc"));
        assert_eq!(
            format!("{:?}", Slice::from(&b"a\x00\""[..])),
            r#"b"a\x00\"""#
        );
        let mut set = std::collections::HashSet::new();
        set.insert(a.clone());
        assert!(set.contains(&b"abc"[..]));
    }
}
