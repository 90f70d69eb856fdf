//! Write the seed corpora (built from real traffic, see `rddp_fuzz::seeds`)
//! into `fuzz/corpus/<target>/seed-<name>`.

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut n = 0;
    for (target, name, data) in rddp_fuzz::seeds::all() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), data)?;
        n += 1;
    }
    println!("wrote {n} seed files under {}", root.display());
    Ok(())
}
