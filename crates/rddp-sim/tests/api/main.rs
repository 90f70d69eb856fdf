//! rddp-sim's tests, one binary: DDP placement and delivery over the simulated
//! LLPs, receive queues drawing on one shared pool, and the RDMAP pair over
//! MPA framing and over whole segments.

mod placement;
mod rdmap_clock;
mod rdmap_damage;
mod rdmap_fence;
mod rdmap_fixture;
mod rdmap_round_trip;
mod rdmap_segments;
mod shared_pool;
