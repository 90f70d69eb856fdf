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
