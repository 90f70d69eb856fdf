#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rddp_fuzz::mpa_rx(data));
