//! The rddp-verbs-abi integration tests: one binary, one module per
//! subject. The library as C sees it: struct layouts against Debian's
//! verbs.h, C programs (tests/c) compiled against it and linked with this
//! crate's libibverbs.so.1, and Debian's unmodified ibverbs-utils run over
//! it. `common` finds the cdylib and the rdma-core files, and skips loudly
//! when they are missing (fails when CI is set).

mod common;

mod capi;
mod helpers;
mod layout;
mod tools;
