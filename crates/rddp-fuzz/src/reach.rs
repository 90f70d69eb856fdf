//! How far an input got (established, messages delivered, segments placed,
//! successful completions), counted per thread, so that a test can check that
//! the seed corpora still reach the real protocol paths and have not rotted
//! into inputs every target refuses at once.

use std::cell::Cell;

/// How far inputs got, counted by the targets as they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Setup completed / a session opened.
    pub established: usize,
    /// Messages delivered to the ULP.
    pub delivered: usize,
    /// Segments or placements the engine accepted.
    pub placed: usize,
    /// Work completions with status Success.
    pub completed_ok: usize,
    /// Messages with payload delivered into a receive posted into a region.
    pub into_region: usize,
}

thread_local! {
    static REACH: Cell<Reach> = Cell::new(Reach::default());
}

pub(crate) fn note(f: impl FnOnce(&mut Reach)) {
    REACH.with(|c| {
        let mut r = c.get();
        f(&mut r);
        c.set(r);
    });
}

/// Run `target` on `data` and return how far it got.
pub fn reach(target: fn(&[u8]), data: &[u8]) -> Reach {
    REACH.with(|c| c.set(Reach::default()));
    target(data);
    REACH.with(Cell::get)
}
