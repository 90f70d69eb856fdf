//! Run every target (or the one named) over pseudo-random inputs on stable, to
//! shake out a harness before a long campaign: `cargo run -p rddp-fuzz
//! --example smoke -- [TARGET] [COUNT]`. Prints the first failing input's
//! file name (written to the current directory).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let only = args.get(1).cloned().filter(|s| s != "all");
    let count: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (name, f) in rddp_fuzz::TARGETS {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        for i in 0..count {
            let len = (next() % 1500) as usize;
            let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if std::panic::catch_unwind(|| f(&data)).is_err() {
                let file = format!("smoke-{name}-{i}");
                std::fs::write(&file, &data).expect("write");
                println!("{name}: input {i} fails, saved as {file}");
                break;
            }
        }
        println!("{name}: done");
    }
}
