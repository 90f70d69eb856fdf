//! The end of a [`Chan`]'s connection: waiting for the peer's close, and
//! turning a Terminate or a close into an error that says which.

use super::*;

impl Chan {
    /// Wait up to `limit` for the peer to close the connection (a Closed event),
    /// so that this side's last messages are known to have arrived before it
    /// drops its queue pair. Dropping aborts the LLP; over SCTP (usrsctp lives
    /// in this process) a message still being retransmitted then never arrives.
    pub(crate) async fn wait_peer_close(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        let mut nap = Duration::from_millis(5);
        loop {
            // The first event decides. Lost is an end too: the peer dropped
            // its queue pair.
            match self.ep.qp.async_events().into_iter().next() {
                Some(AsyncEvent::Closed { .. }) => return Ok(()),
                Some(e) => {
                    self.ended_by.get_or_insert(e.clone());
                    return Err(format!(
                        "the connection ended with {e:?} instead of a close"
                    ));
                }
                None => {}
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "the peer did not close the connection within {} s",
                    limit.as_secs()
                ));
            }
            // Looks every 5 ms at first, less often the longer it waits, so
            // that thousands of connections waiting at once cost little.
            tokio::time::sleep(nap).await;
            nap = (nap * 2).min(Duration::from_millis(100));
        }
    }

    /// What ended the connection: the event `check_events` turned into an error,
    /// or else the first one queued (a flushed completion may have been the
    /// error seen first).
    pub(crate) fn end_event(&mut self) -> Option<AsyncEvent> {
        self.ended_by
            .take()
            .or_else(|| self.ep.qp.async_events().into_iter().next())
    }

    /// Turn a Terminate or a close of the connection into an error.
    pub(crate) fn check_events(&mut self, what: &str) -> Result<(), String> {
        // The first event says what happened; the rest follow from it.
        if let Some(e) = self.ep.qp.async_events().into_iter().next() {
            self.ended_by.get_or_insert(e.clone());
            let why = match e {
                AsyncEvent::TerminateSent { code, detail } => {
                    format!("this side sent Terminate {code}: {detail}")
                }
                AsyncEvent::TerminateReceived { code, .. } => match code {
                    Some(c) => format!("the peer sent Terminate {c}"),
                    None => "the peer sent a malformed Terminate".into(),
                },
                AsyncEvent::Closed { graceful: true } => "the peer closed the connection".into(),
                AsyncEvent::Closed { graceful: false } => "the connection was lost".into(),
            };
            return Err(format!("{why} (while waiting for {what})"));
        }
        Ok(())
    }
}
