//! A transaction's scan: the snapshot's [`Scan`] overlaid with the transaction's own
//! buffered writes in the range, both ways.

use crate::error::Result;
use crate::Slice;

type Item = Result<(Slice, Slice)>;

/// An iterator over a key range as a [`Transaction`](super::Transaction) sees it: its
/// snapshot (less its own range deletions) with its own puts and deletes laid over, in key order (or from the back, in
/// reverse key order). Both ends may be used; they meet without overlap or gap. It owns
/// what it reads: writes the transaction makes after it was made are not in it.
pub struct TransactionScan {
    base: Ends<Item>,
    /// The transaction's writes in the range, in key order (`None`: a delete).
    own: Ends<(Vec<u8>, Option<Vec<u8>>)>,
}

/// A double-ended iterator with one item looked ahead at each end: an item taken ahead at
/// one end is still given out at the other once the iterator runs dry there.
struct Ends<T> {
    it: Box<dyn DoubleEndedIterator<Item = T> + Send>,
    front: Option<T>,
    back: Option<T>,
}

impl<T> Ends<T> {
    fn new(it: impl DoubleEndedIterator<Item = T> + Send + 'static) -> Self {
        Ends {
            it: Box::new(it),
            front: None,
            back: None,
        }
    }

    fn peek_front(&mut self) -> Option<&T> {
        if self.front.is_none() {
            self.front = self.it.next().or_else(|| self.back.take());
        }
        self.front.as_ref()
    }

    fn peek_back(&mut self) -> Option<&T> {
        if self.back.is_none() {
            self.back = self.it.next_back().or_else(|| self.front.take());
        }
        self.back.as_ref()
    }
}

impl TransactionScan {
    pub(super) fn new(
        base: impl DoubleEndedIterator<Item = Item> + Send + 'static,
        own: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Self {
        TransactionScan {
            base: Ends::new(base),
            own: Ends::new(own.into_iter()),
        }
    }
}

impl std::fmt::Debug for TransactionScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionScan").finish_non_exhaustive()
    }
}

/// Which side gives the next item: the snapshot's (`Some(false)`), the transaction's own
/// (`Some(true)`), or none. `ahead` says whether a key `a` of the snapshot comes before a
/// key `b` of the transaction in the iteration order.
fn pick(
    base: Option<&Item>,
    own: Option<&(Vec<u8>, Option<Vec<u8>>)>,
    ahead: impl Fn(&[u8], &[u8]) -> bool,
) -> Option<bool> {
    match (base, own) {
        (None, None) => None,
        (Some(_), None) | (Some(Err(_)), Some(_)) => Some(false),
        (None, Some(_)) => Some(true),
        (Some(Ok((a, _))), Some((b, _))) => Some(!ahead(a, b)),
    }
}

impl Iterator for TransactionScan {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        loop {
            let own_first = pick(self.base.peek_front(), self.own.peek_front(), |a, b| a < b)?;
            if !own_first {
                return self.base.front.take();
            }
            let (k, v) = self.own.front.take()?;
            // The transaction's write replaces the snapshot's entry of the same key.
            if let Some(Ok((bk, _))) = self.base.peek_front() {
                if bk[..] == k[..] {
                    self.base.front = None;
                }
            }
            if let Some(v) = v {
                return Some(Ok((Slice::from(k), Slice::from(v))));
            }
        }
    }
}

impl DoubleEndedIterator for TransactionScan {
    fn next_back(&mut self) -> Option<Item> {
        loop {
            let own_first = pick(self.base.peek_back(), self.own.peek_back(), |a, b| a > b)?;
            if !own_first {
                return self.base.back.take();
            }
            let (k, v) = self.own.back.take()?;
            if let Some(Ok((bk, _))) = self.base.peek_back() {
                if bk[..] == k[..] {
                    self.base.back = None;
                }
            }
            if let Some(v) = v {
                return Some(Ok((Slice::from(k), Slice::from(v))));
            }
        }
    }
}
