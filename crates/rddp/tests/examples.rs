//! The examples, compiled into this test and run: both ends in
//! process with short counts, both ends by argument on a free port, and bad
//! arguments refused with an error (never a panic).

#[allow(dead_code)]
#[path = "../examples/rping.rs"]
mod rping;
#[allow(dead_code)]
#[path = "../examples/write_bw.rs"]
mod write_bw;

use std::time::Duration;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A loopback address whose port was free a moment ago.
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Run `server` args in a thread and `client` args here, retrying the client while
/// the server is not listening yet.
fn by_argument<T: Send + 'static>(run: fn(&[String]) -> rping::Res<T>, extra: &[&str]) {
    let addr = free_addr();
    let mut s = args(&["server", &addr]);
    s.extend(args(extra));
    let server = std::thread::spawn(move || run(&s).map(|_| ()).map_err(|e| e.to_string()));
    let mut c = args(&["client", &addr]);
    c.extend(args(extra));
    let mut res = run(&c).map(|_| ());
    for _ in 0..50 {
        if res.is_ok() || server.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        res = run(&c).map(|_| ());
    }
    res.unwrap();
    server.join().unwrap().unwrap();
}

#[test]
fn rping_in_process() {
    rping::run(&args(&["5"])).unwrap();
}

#[test]
fn rping_server_and_client() {
    by_argument(rping::run, &["3"]);
}

#[test]
fn write_bw_in_process() {
    let gbps = write_bw::run(&args(&["64", "8192", "8"])).unwrap();
    assert!(gbps > 0.0, "{gbps}");
}

#[test]
fn write_bw_server_and_client() {
    by_argument(write_bw::run, &["16", "4096", "4"]);
}

#[test]
fn bad_arguments_are_errors() {
    assert!(rping::run(&args(&["many"])).is_err());
    assert!(write_bw::run(&args(&["1", "lots"])).is_err());
    // Nobody listens on a port that was just freed.
    assert!(rping::run(&args(&["client", &free_addr(), "1"])).is_err());
    assert!(write_bw::run(&args(&["client", &free_addr(), "1"])).is_err());
}
