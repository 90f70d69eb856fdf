//! The rddp API tests: one binary, one module per subject, over real
//! sockets (MPA over loopback TCP, DDP over SCTP on usrsctp) and the
//! in-memory LLP. Helpers shared by the modules live in `common` (a raw
//! MPA peer, a peer that stops reading, the SCTP setup, many queue pairs).

mod common;

mod app_memory;
mod busy_poll;
mod compile_fail;
mod completions;
mod crc_refusal;
mod disconnect;
mod emss_follow;
mod exchange;
mod fenced;
mod fuzz_findings;
mod ird_while_sending;
mod many_qps;
mod marker_mismatch;
mod memory_close;
mod mpa_negotiation;
mod pingpong_lone;
mod qp_memory;
mod qp_mpa;
mod recv_buffer;
mod recv_in_region;
mod resources;
mod rx_direct_crc;
mod rx_direct_qp;
mod rx_small_direct;
mod sctp_backpressure_active;
mod sctp_backpressure_passive;
mod sctp_copies;
mod sctp_direct;
mod sctp_ird_ord;
mod sctp_reads_at_ird;
mod sctp_refused_unplaced;
mod stats;
mod terminate_codes;
mod terminate_drain;
mod terminate_reset;
mod tx_completion;
mod tx_full_socket;
mod tx_gather;
mod tx_lease;
mod tx_resume;
mod tx_resume_lone;
mod unsignaled;
mod verbs_hooks;
