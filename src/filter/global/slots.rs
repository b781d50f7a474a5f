//! A bucket's entries, decoded: what the layout encodes into a bucket's bits and the table
//! reads back.

/// One slot's content: a run and the fingerprint stored for the key in that run (11 bits in
/// `Fixed16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct Entry {
    pub(super) run: u8,
    pub(super) fp: u32,
}

/// A bucket's entries, decoded (at most 4; order is the layout's canonical order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Slots {
    pub(super) n: usize,
    pub(super) e: [Entry; 4],
}

impl Slots {
    pub(super) fn entries(&self) -> &[Entry] {
        &self.e[..self.n]
    }

    pub(super) fn find(&self, want: Entry) -> Option<usize> {
        self.entries().iter().position(|&e| e == want)
    }

    pub(super) fn with(&self, e: Entry) -> Option<Slots> {
        (self.n < 4).then(|| {
            let mut s = *self;
            s.e[s.n] = e;
            s.n += 1;
            s
        })
    }

    pub(super) fn replaced(&self, j: usize, e: Entry) -> Slots {
        let mut s = *self;
        s.e[j] = e;
        s
    }

    pub(super) fn without(&self, j: usize) -> Slots {
        let mut s = *self;
        s.e[j] = s.e[s.n - 1];
        s.e[s.n - 1] = Entry::default();
        s.n -= 1;
        s
    }
}
