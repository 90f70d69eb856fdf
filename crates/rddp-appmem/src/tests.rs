//! Each test's "application memory" is a boxed slice turned into a raw pointer
//! (`Box::into_raw`), so no Rust reference to it lives while an `AppMem` copies
//! into it; the test looks at it only through raw pointers or `AppMem` itself,
//! and frees it after the `AppMem` is gone, as `ibv_dereg_mr` then `free` do
//! (each test declares the `Foreign` first, so it drops last).

use super::*;
use std::sync::Arc;
use std::thread;

/// Memory "the application" allocated: freed on drop.
struct Foreign {
    ptr: *mut [u8],
}

// SAFETY: the test threads touch the memory only through `AppMem` or atomic
// accesses, as the application and the stack do.
unsafe impl Send for Foreign {}
// SAFETY: as for `Send`.
unsafe impl Sync for Foreign {}

impl Foreign {
    fn new(len: usize, fill: u8) -> Self {
        Self {
            ptr: Box::into_raw(vec![fill; len].into_boxed_slice()),
        }
    }
    fn base(&self) -> *mut u8 {
        self.ptr.cast()
    }
    fn len(&self) -> usize {
        self.ptr.len()
    }
    fn mem(&self, writable: bool) -> AppMem {
        // SAFETY: the allocation lives until `self` drops, which every test does
        // after the `AppMem`; nothing holds a reference into it.
        unsafe { AppMem::new(self.base(), self.len(), writable) }.expect("a real allocation")
    }
    /// The octets, read the way the application would (through the pointer).
    fn snapshot(&self) -> Vec<u8> {
        (0..self.len())
            // SAFETY: inside the allocation; read atomically, as `AppMem` writes.
            .map(|i| unsafe { AtomicU8::from_ptr(self.base().add(i)) }.load(Ordering::Acquire))
            .collect()
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `new`, freed once, here.
        drop(unsafe { Box::from_raw(self.ptr) });
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every offset and length around the ends and the word boundaries: what is
/// written lands exactly there, reads back, and nothing else changes.
#[test]
fn write_and_read_every_offset_and_length() {
    let size = 3 * WORD + 3;
    let f = Foreign::new(size, 0xee);
    let m = f.mem(true);
    let mut model = vec![0xee; size];
    let mut seed = 0u8;
    for off in 0..=size {
        for len in 0..=size - off {
            seed = seed.wrapping_add(1);
            let src = pattern(len, seed);
            m.write(off, &src).expect("in range");
            model[off..off + len].copy_from_slice(&src);
            let mut back = vec![0; len];
            m.read(off, &mut back).expect("in range");
            assert_eq!(back, src, "offset {off} length {len}");
        }
    }
    assert_eq!(f.snapshot(), model);
    assert_eq!(m.to_vec(0, size).expect("whole"), model);
}

/// A registration that starts at an unaligned address copies the same way.
#[test]
fn unaligned_base() {
    let f = Foreign::new(4 * WORD, 0);
    for start in 0..WORD {
        let len = 2 * WORD + 1;
        // SAFETY: a sub-range of the allocation, which outlives the value.
        let m = unsafe { AppMem::new(f.base().wrapping_add(start), len, true) }.expect("memory");
        assert_eq!(m.addr(), f.base().addr() + start);
        let src = pattern(len, start as u8);
        m.write(0, &src).expect("in range");
        assert_eq!(m.to_vec(0, len).expect("in range"), src);
        assert_eq!(f.snapshot()[start..start + len], src[..]);
    }
}

#[test]
fn out_of_range_is_refused_and_copies_nothing() {
    let f = Foreign::new(16, 7);
    let m = f.mem(true);
    let refused = |offset, len| AppMemError::OutOfRange {
        offset,
        len,
        size: 16,
    };
    assert_eq!(m.write(10, &[1; 7]), Err(refused(10, 7)));
    assert_eq!(m.write(17, &[]), Err(refused(17, 0)));
    assert_eq!(m.write(usize::MAX, &[1]), Err(refused(usize::MAX, 1)));
    let mut dst = [9; 17];
    assert_eq!(m.read(0, &mut dst), Err(refused(0, 17)));
    assert_eq!(dst, [9; 17]);
    assert_eq!(m.to_vec(usize::MAX, 2), Err(refused(usize::MAX, 2)));
    assert_eq!(f.snapshot(), vec![7; 16]);
    // The very end is inside, with nothing to copy.
    assert_eq!(m.write(16, &[]), Ok(()));
    assert_eq!(m.read(16, &mut []), Ok(()));
}

#[test]
fn read_only_refuses_writes() {
    let f = Foreign::new(8, 3);
    let m = f.mem(false);
    assert!(!m.is_writable());
    assert_eq!(m.write(0, &[1]), Err(AppMemError::ReadOnly));
    assert_eq!(m.write(0, &[]), Ok(()));
    assert_eq!(m.to_vec(0, 8).expect("readable"), vec![3; 8]);
    assert_eq!(f.snapshot(), vec![3; 8]);
}

#[test]
fn construction_refuses_what_cannot_be_memory() {
    // SAFETY: `new` refuses each of these before anything could be accessed.
    unsafe {
        assert!(AppMem::new(std::ptr::null_mut(), 1, true).is_none());
        assert!(AppMem::new(std::ptr::without_provenance_mut(usize::MAX), 2, true).is_none());
        assert!(
            AppMem::new(
                std::ptr::without_provenance_mut(64),
                usize::MAX / 2 + 1,
                true
            )
            .is_none()
        );
    }
    // SAFETY: an empty registration never accesses memory, whatever its base.
    let empty = unsafe { AppMem::new(std::ptr::null_mut(), 0, true) }.expect("empty");
    assert!(empty.is_empty());
    assert_eq!(empty.write(0, &[]), Ok(()));
    assert_eq!(
        empty.write(0, &[1]),
        Err(AppMemError::OutOfRange {
            offset: 0,
            len: 1,
            size: 0
        })
    );
}

/// The application polls the last octet of its buffer while the stack places
/// a message: once the octet changes, the whole message is there (the
/// `Release` store of the last octet pairs with the poller's `Acquire` load).
#[test]
fn a_poller_of_the_last_octet_sees_the_whole_message() {
    let len = 2 * WORD + 5;
    let f = Arc::new(Foreign::new(len, 0));
    let m = f.mem(true);
    let poller = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            // SAFETY: the last octet of the live allocation, read atomically.
            let last = unsafe { AtomicU8::from_ptr(f.base().add(len - 1)) };
            while last.load(Ordering::Acquire) == 0 {
                thread::yield_now();
            }
            (0..len)
                // SAFETY: inside the allocation; the placement's stores happen
                // before the `Acquire` load above saw the last one.
                .map(|i| unsafe { f.base().add(i).read() })
                .collect::<Vec<u8>>()
        })
    };
    let msg: Vec<u8> = (1..=len as u8).collect();
    m.write(0, &msg).expect("in range");
    assert_eq!(poller.join().expect("poller"), msg);
}

/// Two threads place into the same octets through two registrations of one
/// buffer (an application may register a buffer twice): defined behaviour,
/// and each octet ends up as one of the two writers left it.
#[test]
fn racing_placements_through_two_registrations() {
    let len = 3 * WORD;
    let f = Foreign::new(len, 0);
    let (a, b) = (f.mem(true), f.mem(true));
    thread::scope(|s| {
        s.spawn(|| a.write(0, &vec![1; len]).expect("in range"));
        s.spawn(|| b.write(0, &vec![2; len]).expect("in range"));
    });
    assert!(f.snapshot().iter().all(|&o| o == 1 || o == 2));
}

/// `read(2)` into application memory and `send(2)` out of it, given the raw
/// range (Miri does not run these system calls).
#[cfg_attr(miri, ignore)]
#[test]
fn system_calls_copy_straight_to_and_from_the_range() {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    let f = Foreign::new(32, 0);
    let m = f.mem(true);
    let (mut x, mut y) = UnixStream::pair().expect("socketpair");
    x.write_all(b"hello, region").expect("write");
    assert_eq!(m.read_fd(y.as_fd(), 3, 13).expect("read"), 13);
    assert_eq!(m.to_vec(3, 13).expect("in range"), b"hello, region");
    assert_eq!(m.send_fd(y.as_fd(), 3, 5).expect("send"), 5);
    let mut got = [0; 5];
    x.read_exact(&mut got).expect("read back");
    assert_eq!(&got, b"hello");

    let e = m.read_fd(y.as_fd(), 30, 3).expect_err("outside");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let ro = f.mem(false);
    let e = ro.read_fd(y.as_fd(), 0, 1).expect_err("read-only");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    drop(x);
    let e = m.send_fd(y.as_fd(), 0, 4).expect_err("peer closed");
    assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    y.flush().expect("flush");
}

/// `readv(2)` straight into the range and on into the caller's tail: short
/// reads leave the range's last octet alone, a read that reaches it stores it,
/// and a bad range or a read-only registration reads nothing (Miri does not
/// run the system call).
#[cfg_attr(miri, ignore)]
#[test]
fn readv_fills_the_range_then_the_tail() {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    let f = Foreign::new(16, 0xee);
    let m = f.mem(true);
    let (mut x, y) = UnixStream::pair().expect("socketpair");
    let mut tail = [0u8; 4];

    // Only part of the range has come: its last octet is not touched.
    x.write_all(b"abc").expect("write");
    assert_eq!(m.readv_fd(y.as_fd(), 2, 5, &mut tail).expect("read"), 3);
    assert_eq!(
        m.to_vec(0, 8).expect("in range"),
        b"\xee\xeeabc\xee\xee\xee"
    );
    // One octet short of the range's end, then the rest and the tail.
    x.write_all(b"d").expect("write");
    assert_eq!(m.readv_fd(y.as_fd(), 5, 2, &mut tail).expect("read"), 1);
    assert_eq!(m.to_vec(6, 1).expect("in range"), [0xee]);
    x.write_all(b"eCRC!extra").expect("write");
    assert_eq!(m.readv_fd(y.as_fd(), 6, 1, &mut tail).expect("read"), 5);
    assert_eq!(m.to_vec(0, 8).expect("in range"), b"\xee\xeeabcde\xee");
    assert_eq!(&tail, b"CRC!");
    // A range of no octets reads the tail alone.
    assert_eq!(m.readv_fd(y.as_fd(), 16, 0, &mut tail).expect("read"), 4);
    assert_eq!(&tail, b"extr");

    let e = m
        .readv_fd(y.as_fd(), 14, 3, &mut tail)
        .expect_err("outside");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = f
        .mem(false)
        .readv_fd(y.as_fd(), 0, 1, &mut tail)
        .expect_err("read-only");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    // Nothing was consumed by the refusals.
    let mut rest = [0u8; 1];
    (&y).read_exact(&mut rest).expect("read");
    assert_eq!(&rest, b"a");
    assert_eq!(f.snapshot()[14..], [0xee, 0xee]);
}

/// A scan shows exactly the range's octets, in order, in pieces of at most
/// `SCAN_CHUNK` (a CRC fed piece by piece equals one over the whole), for
/// ranges around the chunk size and at every unaligned start; a range not
/// inside is refused before `f` is called. Pure Rust: runs under Miri.
#[test]
fn scan_shows_the_range_in_chunks() {
    let size = SCAN_CHUNK + 2 * WORD + 3;
    let f = Foreign::new(size, 0);
    let m = f.mem(true);
    let whole = pattern(size, 5);
    m.write(0, &whole).expect("in range");
    let lens = [
        0,
        1,
        WORD + 1,
        SCAN_CHUNK - 1,
        SCAN_CHUNK,
        SCAN_CHUNK + WORD + 1,
    ];
    for off in 0..WORD {
        for len in lens {
            let mut seen = Vec::new();
            let mut pieces = 0;
            m.scan(off, len, |c| {
                assert!(!c.is_empty() && c.len() <= SCAN_CHUNK);
                seen.extend_from_slice(c);
                pieces += 1;
            })
            .expect("in range");
            assert_eq!(seen, whole[off..off + len], "offset {off} length {len}");
            assert_eq!(pieces, len.div_ceil(SCAN_CHUNK));
        }
    }
    let mut called = false;
    assert_eq!(
        m.scan(size - 1, 2, |_| called = true),
        Err(AppMemError::OutOfRange {
            offset: size - 1,
            len: 2,
            size
        })
    );
    assert_eq!(
        m.scan(usize::MAX, 1, |_| called = true),
        Err(AppMemError::OutOfRange {
            offset: usize::MAX,
            len: 1,
            size
        })
    );
    assert!(!called);
    // A read-only registration may be scanned.
    let mut n = 0;
    f.mem(false)
        .scan(0, size, |c| n += c.len())
        .expect("readable");
    assert_eq!(n, size);
}

/// (Not under Miri, which reports the leak, as it should.)
#[cfg_attr(miri, ignore)]
#[test]
fn leaked_memory_takes_several_registrations() {
    let l = Leaked::new(2 * WORD + 1);
    let (a, b) = (l.mem(true), l.mem(false));
    assert_eq!(a.addr(), l.addr());
    a.write(1, b"leaked").expect("in range");
    assert_eq!(b.to_vec(0, 8).expect("in range"), b"\0leaked\0");
    assert_eq!(b.write(0, b"x"), Err(AppMemError::ReadOnly));
}
