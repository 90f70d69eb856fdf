//! CI replays every fuzz corpus on stable Rust: each file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the
//! target's function, so an input that once passed (or a past crash, once fixed)
//! panicking again fails this test, naming the file.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn replay(name: &str) {
    let (_, f) = rddp_fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("target is listed");
    let corpus = files(&fuzz_dir().join("corpus").join(name));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{name}/ is empty or missing: the target would be replayed on nothing"
    );
    let regressions = files(&fuzz_dir().join("regressions").join(name));
    let mut failed = Vec::new();
    for p in corpus.iter().chain(&regressions) {
        let data = std::fs::read(p).expect("readable corpus file");
        if std::panic::catch_unwind(|| f(&data)).is_err() {
            failed.push(p.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: {} of {} inputs fail: {failed:?}",
        failed.len(),
        corpus.len() + regressions.len()
    );
}

macro_rules! replay_tests {
    ($($t:ident),*) => {
        $(#[test] fn $t() { replay(stringify!($t)); })*

        /// Every target has a test above, a libFuzzer target file and a [[bin]].
        #[test]
        fn every_target_is_replayed_and_built() {
            let listed: Vec<&str> = rddp_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
            assert_eq!(listed, [$(stringify!($t)),*]);
            let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
            for n in listed {
                let src = fuzz_dir().join("fuzz_targets").join(format!("{n}.rs"));
                let body = std::fs::read_to_string(&src).unwrap_or_default();
                assert!(body.contains(&format!("rddp_fuzz::{n}(")), "{} must call rddp_fuzz::{n}", src.display());
                assert!(manifest.contains(&format!("name = \"{n}\"")), "fuzz/Cargo.toml lacks [[bin]] {n}");
            }
        }
    };
}

replay_tests!(
    wire_decoders,
    mpa_setup,
    mpa_rx,
    ddp_sink,
    rdmap_stream,
    sctp_adaptation,
    verbs_ops
);
