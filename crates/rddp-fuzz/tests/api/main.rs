//! rddp-fuzz's tests, one binary: the corpora replayed on stable Rust, and the
//! seed corpora still reaching the paths they were made for.

mod replay;
mod seeds;
