//! Compiling patterns into the automaton: the trie, its failure links folded into a dense
//! transition table, each state's merged output.

use super::parse::symbol_of;
use super::row::{pack_output, EMPTY_ROW};
use super::{Pattern, Patterns, EDGE, MAX_STATES, ROW_GAPS, SYMBOLS, WINDOW};
use filterstore::{Error, Result};

impl Patterns {
    /// Compiles parsed patterns.
    pub fn compile(patterns: &[Pattern]) -> Result<Patterns> {
        // 1. The trie. `children[s][c]` is 0 for "none" (the root is never a child).
        let mut children: Vec<[u32; SYMBOLS]> = vec![[0; SYMBOLS]];
        let mut depth: Vec<usize> = vec![0];
        let mut own: Vec<Option<Vec<u8>>> = vec![None];
        let mut max_len = 0;
        for p in patterns {
            if p.scores.len() != p.letters.len() + 1 || p.scores.iter().any(|&v| v > 9) {
                return Err(Error::InvalidArgument(
                    "malformed hyphenation pattern".to_string(),
                ));
            }
            let mut s = 0usize;
            for &ch in &p.letters {
                let c = symbol_of(ch).ok_or_else(|| {
                    Error::InvalidArgument(format!("bad pattern character {:?}", ch as char))
                })?;
                let next = children[s][c as usize];
                s = if next == 0 {
                    let n = children.len();
                    if n >= MAX_STATES {
                        return Err(Error::InvalidArgument(format!(
                            "patterns need more than {MAX_STATES} automaton states"
                        )));
                    }
                    children.push([0; SYMBOLS]);
                    depth.push(depth[s] + 1);
                    own.push(None);
                    children[s][c as usize] = n as u32;
                    n
                } else {
                    next as usize
                };
            }
            if own[s].is_some() {
                let text: String = p.letters.iter().map(|&b| b as char).collect();
                return Err(Error::InvalidArgument(format!(
                    "duplicate hyphenation pattern for {text:?}"
                )));
            }
            own[s] = Some(p.scores.clone());
            max_len = max_len.max(p.letters.len());
        }
        let states = children.len();

        // 2. Breadth-first: failure links folded into a dense table, merged outputs.
        let mut next = vec![[0u16; SYMBOLS]; states];
        let mut fail = vec![0usize; states];
        // merged[s][back] = max score `back` gaps before the one after the state's string.
        let mut merged: Vec<Vec<u8>> = vec![Vec::new(); states];
        let mut order = Vec::with_capacity(states);
        order.push(0usize);
        let mut head = 0;
        while head < order.len() {
            let s = order[head];
            head += 1;
            // Merged output of s: own pattern plus the (already computed) one of fail(s).
            let mut m = vec![0u8; depth[s] + 1];
            if s != 0 {
                for (back, &v) in merged[fail[s]].iter().enumerate() {
                    m[back] = m[back].max(v);
                }
            }
            if let Some(sc) = &own[s] {
                let l = sc.len() - 1;
                for (j, &v) in sc.iter().enumerate() {
                    m[l - j] = m[l - j].max(v);
                }
            }
            merged[s] = m;
            for c in 0..SYMBOLS {
                let child = children[s][c] as usize;
                if child != 0 {
                    fail[child] = if s == 0 { 0 } else { next[fail[s]][c] as usize };
                    next[s][c] = child as u16;
                    order.push(child);
                } else if s != 0 {
                    next[s][c] = next[fail[s]][c];
                }
                // The root's missing transitions stay 0 = the root.
            }
        }

        // 3. One row per state, numbered breadth-first (the root is 0), except that the
        //    states with outputs ROW_GAPS or more gaps back (deep) come last.
        let is_deep = |st: usize| merged[st].iter().skip(ROW_GAPS).any(|&v| v > 0);
        let count = states;
        let mut id = vec![0usize; states];
        let mut rep = Vec::with_capacity(states);
        for deep_pass in [false, true] {
            for &st in &order {
                if is_deep(st) == deep_pass {
                    id[st] = rep.len();
                    rep.push(st);
                }
            }
        }
        let state_id = |st: usize| id[st];
        let mut rows = vec![EMPTY_ROW; count];
        let mut first_deep = count;
        let mut deep_ranges = Vec::new();
        let mut deep_outputs = Vec::new();
        for (i, &st) in rep.iter().enumerate() {
            let (lo, hi) = pack_output(&merged[st]);
            let row = &mut rows[i];
            row.set_output(lo, hi);
            for (cell, &t) in row.cells.iter_mut().zip(&next[st]) {
                *cell = state_id(t as usize) as u16;
            }
            if is_deep(st) {
                first_deep = first_deep.min(i);
                let start = deep_outputs.len() as u32;
                for (back, &v) in merged[st].iter().enumerate().skip(ROW_GAPS) {
                    if v > 0 {
                        deep_outputs.push((back as u16, v));
                    }
                }
                deep_ranges.push((i, start, deep_outputs.len() as u32));
            }
        }
        let after_edge = state_id(next[0][EDGE as usize] as usize);
        let far_outputs = deep_outputs
            .iter()
            .any(|&(back, _)| back as usize >= WINDOW);
        Ok(Patterns {
            rows,
            first_deep,
            far_outputs,
            deep_ranges,
            deep_outputs,
            after_edge,
            count: patterns.len(),
            max_len,
        })
    }
}
