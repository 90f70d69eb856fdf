#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rddp_fuzz::wire_decoders(data));
