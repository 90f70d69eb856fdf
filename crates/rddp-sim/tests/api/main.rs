//! rddp-sim's tests, one binary: DDP placement and delivery over the simulated
//! LLPs, and receive queues drawing on one shared pool.

mod placement;
mod shared_pool;
