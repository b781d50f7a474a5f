//! Snapshot unit tests.
