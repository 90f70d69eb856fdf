//! Process limits a program with many queue pairs needs: every connection,
//! even one still in MPA setup, holds a file descriptor, and the usual soft
//! limit (1,024) is far below the queue pairs a process can run.

use std::io;

/// Raise the soft RLIMIT_NOFILE to the hard limit (what an unprivileged
/// process may do) and return the soft limit now in force (`u64::MAX` for
/// none). An error (its message says what it means) leaves the limit as it
/// was: connections beyond it are refused with `EMFILE`.
pub fn raise_open_file_limit() -> io::Result<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        l.current = l.maximum;
        setrlimit(Resource::Nofile, l).map_err(|e| {
            io::Error::other(format!(
                "cannot raise the open-file limit to the hard limit ({e}); \
                 connections beyond it are refused"
            ))
        })?;
    }
    Ok(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX))
}
