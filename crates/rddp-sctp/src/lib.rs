//! DDP over SCTP (RFC 5043; seed 001; spec §5).
