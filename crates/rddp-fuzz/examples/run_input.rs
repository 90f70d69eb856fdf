//! Run one target on input files on stable (to reproduce a fuzz finding with a
//! debugger or prints): `cargo run -p rddp-fuzz --example run_input -- TARGET FILE...`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (_, f) = rddp_fuzz::TARGETS
        .iter()
        .find(|(n, _)| Some(*n) == args.get(1).map(String::as_str))
        .expect("usage: run_input TARGET FILE...");
    for p in &args[2..] {
        let data = std::fs::read(p).expect("readable input");
        f(&data);
        println!("{p}: ok");
    }
}
