//! Misuse that Rust rejects at compile time (issue: verbs API, point 5).

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
