//! Noticing a dead peer or a cut link within a bound (RFC 5041: the LLP reports a
//! lost connection; TCP alone may take about 15 minutes with unacknowledged data,
//! tcp_retries2 = 15, and never notices on an idle connection).
//!
//! With `MpaOptions::dead_peer_timeout = Some(t)` every MPA socket gets
//! TCP_USER_TIMEOUT = t (RFC 5482: data unacknowledged for t ends the connection)
//! and keepalive (RFC 1122 §4.2.3.6) after t/2 of silence, probing every
//! max(1 s, t/10); with a user timeout set, Linux ends an unanswered keepalive once
//! t has passed since the last octet received. Either way the socket fails, the
//! reader and writer see an error, and the queue pair flushes every posted work
//! request.
//!
//! The bound, [`dead_peer_bound`]: 2t + max(1 s, t/10). An idle connection ends
//! within t + one probe interval of the last octet received. With data to send,
//! the user timeout counts from the first transmission left unanswered, and after
//! a cut that can come late: with the veth carrier down, Linux held unsent data
//! in window probes for about 1.3 s before transmitting again (measured 2.2 to
//! 4.5 s in all with t = 2 s, crates/rddp-cli/tests/peer_death).

use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// Keepalive idle time and probe interval for `t` (whole seconds, at least 1 s:
/// TCP_KEEPIDLE and TCP_KEEPINTVL count seconds).
pub fn keepalive_for(t: Duration) -> (Duration, Duration) {
    let secs = |d: Duration| Duration::from_secs(d.as_secs().max(1));
    (secs(t / 2), secs(t / 10))
}

/// The longest a dead link goes unnoticed with `t` (see the module doc):
/// 2t + one keepalive probe interval.
pub fn dead_peer_bound(t: Duration) -> Duration {
    2 * t + keepalive_for(t).1
}

/// Apply `timeout` (see the module doc) to `sock`; `None` leaves the kernel's
/// defaults.
pub fn set_dead_peer_timeout(sock: &TcpStream, timeout: Option<Duration>) -> io::Result<()> {
    let Some(t) = timeout else {
        return Ok(());
    };
    let s = socket2::SockRef::from(sock);
    let (idle, interval) = keepalive_for(t);
    let ka = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(interval);
    s.set_tcp_keepalive(&ka)?;
    s.set_keepalive(true)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    s.set_tcp_user_timeout(Some(t))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn keepalive_is_half_and_a_tenth_in_whole_seconds() {
        let s = Duration::from_secs;
        assert_eq!(keepalive_for(s(30)), (s(15), s(3)));
        assert_eq!(keepalive_for(s(2)), (s(1), s(1)));
        assert_eq!(keepalive_for(Duration::from_millis(300)), (s(1), s(1)));
        assert_eq!(dead_peer_bound(s(30)), s(63));
    }

    #[test]
    fn the_socket_carries_the_settings() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_dead_peer_timeout(&c, Some(Duration::from_secs(4))).unwrap();
        let r = socket2::SockRef::from(&c);
        assert!(r.keepalive().unwrap());
        assert_eq!(r.tcp_keepalive_time().unwrap(), Duration::from_secs(2));
        #[cfg(target_os = "linux")]
        assert_eq!(r.tcp_user_timeout().unwrap(), Some(Duration::from_secs(4)));
        // None leaves the defaults alone.
        let d = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_dead_peer_timeout(&d, None).unwrap();
        assert!(!socket2::SockRef::from(&d).keepalive().unwrap());
    }
}
