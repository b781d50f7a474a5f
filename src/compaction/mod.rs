//! Leveled compaction: what to compact ([`plan`]: pure, no I/O) and how ([`run`]: a streaming
//! merge into rolling table files).

pub(crate) mod expire;
pub(crate) mod plan;
pub(crate) mod run;
