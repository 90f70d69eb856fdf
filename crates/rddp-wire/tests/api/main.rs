//! rddp-wire's tests, one binary: the worked test vectors byte for byte, and
//! property tests of the FPDU encoder and decoder.

mod fpdu_props;
mod vectors;
