//! The event loop on real sockets: readiness, deadlines, wakes from other
//! threads, tasks spawned from a run, hand-over of the socket, shutdown.

use rddp_io::{Cx, Driver, Next, Task};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc::{Sender, channel};
use std::time::{Duration, Instant};

/// A connected pair over loopback.
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    (a, b)
}

/// Reads its socket until `want` octets came, then hands socket and octets back.
struct Collect {
    sock: TcpStream,
    want: usize,
    got: Vec<u8>,
    runs: usize,
    done: Sender<(TcpStream, Vec<u8>, usize)>,
}

impl Task for Collect {
    fn fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn run(&mut self, _: &mut Cx<'_>) -> Next {
        self.runs += 1;
        let mut buf = [0u8; 1000];
        while self.got.len() < self.want {
            match self.sock.read(&mut buf) {
                Ok(0) => return Next::Done,
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::readable(None),
                Err(e) => panic!("{e}"),
            }
        }
        Next::Done
    }

    fn finish(self: Box<Self>) {
        let _ = self.done.send((self.sock, self.got, self.runs));
    }
}

#[test]
fn a_task_reads_on_readiness_and_hands_its_socket_back() {
    let d = Driver::new(2).unwrap();
    assert_eq!(d.threads(), 2);
    let (mut a, b) = pair();
    b.set_nonblocking(true).unwrap();
    let (tx, rx) = channel();
    d.spawn(Box::new(Collect {
        sock: b,
        want: 20_000,
        got: Vec::new(),
        runs: 0,
        done: tx,
    }))
    .unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    for c in data.chunks(5_000) {
        a.write_all(c).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut b, got, runs) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(got, data);
    // Run once when spawned, then only on readiness: once per burst or so.
    assert!((2..=50).contains(&runs), "{runs} runs");
    // The socket is no longer the loop's: it serves a blocking reader.
    b.set_nonblocking(false).unwrap();
    a.write_all(b"after").unwrap();
    let mut five = [0u8; 5];
    b.read_exact(&mut five).unwrap();
    assert_eq!(&five, b"after");
}

/// No socket: done once `at` has passed; reports how late it ran.
struct Sleep {
    at: Instant,
    done: Sender<Duration>,
}

impl Task for Sleep {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        if cx.now >= self.at {
            let _ = self.done.send(cx.now - self.at);
            return Next::Done;
        }
        Next::Wait {
            interest: None,
            deadline: Some(self.at),
        }
    }
}

#[test]
fn a_thousand_deadlines_on_two_threads_each_fire_once_when_due() {
    let d = Driver::new(2).unwrap();
    let (tx, rx) = channel();
    let t0 = Instant::now();
    for i in 0..1000u64 {
        let at = t0 + Duration::from_millis(50 + (i * 7919) % 300);
        d.spawn(Box::new(Sleep {
            at,
            done: tx.clone(),
        }))
        .unwrap();
    }
    let fired = recv_n(&rx, 1000);
    assert_eq!(fired.len(), 1000, "timers that fired");
    assert!(
        rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "a timer fired twice"
    );
}

/// Waits for nothing but a wake.
struct Woken {
    done: Sender<&'static str>,
}

impl Task for Woken {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        if cx.woken {
            return Next::Done;
        }
        Next::Wait {
            interest: None,
            deadline: None,
        }
    }

    fn finish(self: Box<Self>) {
        let _ = self.done.send("finished");
    }
}

#[test]
fn another_thread_wakes_a_task() {
    let d = Driver::new(1).unwrap();
    let (tx, rx) = channel();
    let h = d.spawn(Box::new(Woken { done: tx })).unwrap();
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "ran to the end unwoken"
    );
    std::thread::spawn(move || h.wake()).join().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("finished"));
}

/// Spawns `n` children on its own thread; each child reports its thread's name.
struct Parent {
    n: usize,
    done: Sender<String>,
}

impl Task for Parent {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        for _ in 0..self.n {
            let done = self.done.clone();
            cx.spawn(Box::new(Child { done }));
        }
        let _ = self.done.send(thread_name());
        Next::Done
    }
}

struct Child {
    done: Sender<String>,
}

impl Task for Child {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, _: &mut Cx<'_>) -> Next {
        let _ = self.done.send(thread_name());
        Next::Done
    }
}

/// Up to `n` messages, each within 10 s of the one before.
fn recv_n<T>(rx: &std::sync::mpsc::Receiver<T>, n: usize) -> Vec<T> {
    (0..n)
        .map_while(|_| rx.recv_timeout(Duration::from_secs(10)).ok())
        .collect()
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_string()
}

#[test]
fn tasks_spawned_from_a_run_start_on_the_same_thread() {
    let d = Driver::new(2).unwrap();
    let (tx, rx) = channel();
    d.spawn(Box::new(Parent { n: 5, done: tx })).unwrap();
    let names = recv_n(&rx, 6);
    assert_eq!(names.len(), 6);
    assert!(names[0].starts_with("rddp-io-"), "{names:?}");
    assert!(names.iter().all(|n| *n == names[0]), "{names:?}");
}

/// Holds a socket and waits for it forever.
struct Hold {
    sock: TcpStream,
}

impl Task for Hold {
    fn fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn run(&mut self, _: &mut Cx<'_>) -> Next {
        Next::readable(None)
    }
}

#[test]
fn dropping_the_driver_stops_its_threads_and_closes_what_its_tasks_held() {
    let d = Driver::new(1).unwrap();
    let (mut a, b) = pair();
    b.set_nonblocking(true).unwrap();
    d.spawn(Box::new(Hold { sock: b })).unwrap();
    a.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 8];
    assert!(a.read(&mut buf).is_err(), "closed while the driver runs");
    drop(d);
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(a.read(&mut buf).unwrap(), 0);
}

/// A descriptor epoll cannot watch (a regular file): the task is told.
struct Unwatchable {
    file: std::fs::File,
    failed: Sender<ErrorKind>,
}

impl Task for Unwatchable {
    fn fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }

    fn run(&mut self, _: &mut Cx<'_>) -> Next {
        Next::readable(None)
    }

    fn finish(self: Box<Self>) {
        panic!("finished although never watched");
    }

    fn failed(self: Box<Self>, err: std::io::Error) {
        let _ = self.failed.send(err.kind());
    }
}

#[test]
fn a_socket_the_loop_cannot_watch_fails_the_task() {
    let d = Driver::new(1).unwrap();
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let (tx, rx) = channel();
    d.spawn(Box::new(Unwatchable { file, failed: tx })).unwrap();
    // epoll refuses regular files with EPERM.
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(ErrorKind::PermissionDenied)
    );
}

/// Asks to run again at once (deadline = now) a number of times, as a task that
/// yields to its thread's other tasks does, then reports its runs.
struct Yielder {
    left: usize,
    runs: usize,
    done: Sender<usize>,
}

impl Task for Yielder {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        self.runs += 1;
        if self.left == 0 {
            return Next::Done;
        }
        self.left -= 1;
        Next::Wait {
            interest: None,
            deadline: Some(cx.now),
        }
    }

    fn finish(self: Box<Self>) {
        let _ = self.done.send(self.runs);
    }
}

#[test]
fn a_deadline_asked_again_from_the_run_it_caused_is_kept() {
    // The run that a deadline caused may ask for the same instant again (the
    // loop's clock has not moved): that is a new deadline, not the old one.
    let d = Driver::new(1).unwrap();
    let (tx, rx) = channel();
    d.spawn(Box::new(Yielder {
        left: 100,
        runs: 0,
        done: tx,
    }))
    .unwrap();
    let runs = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the task was never run again");
    assert_eq!(runs, 101);
}
