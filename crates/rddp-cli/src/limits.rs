//! Process limits a server needs: every connection, even one still in MPA setup,
//! holds a file descriptor, and the usual soft limit (1024) is far below what
//! `rddp target` serves.

/// Raise the soft RLIMIT_NOFILE to the hard limit. Returns a warning if that failed.
pub(crate) fn raise_nofile() -> Option<String> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current == l.maximum {
        return None;
    }
    l.current = l.maximum;
    setrlimit(Resource::Nofile, l).err().map(|e| {
        format!("cannot raise the open-file limit to the hard limit ({e}); connections beyond it are refused")
    })
}
