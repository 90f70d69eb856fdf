//! The server side of a run on one attached queue pair: answers the client's
//! control messages, keeps receives posted and grants them, checks payloads.

use super::bw::{CHECK_LEN, remote_at};
use super::chan::{Chan, Incoming};
use super::copies::Copies;
use super::endpoint::Endpoint;
use super::lat;
use super::opts::{Op, ServerOpts};
use super::pattern::{self, Key, space};
use super::proto::{CTRL_LEN, Msg};
use rddp::{Access, AsyncEvent, MemoryRegion, RemoteBuf};

/// What the server saw of a whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerSummary {
    pub sizes: usize,
    pub messages: u64,
    pub corrupt: u64,
}

/// How a server's run ended: what it saw (also when it failed), and why it failed.
#[derive(Debug)]
pub(crate) struct ServerEnd {
    /// Sizes and messages taken and corrupt octets found, up to the end or the
    /// failure (Sends are counted one by one, so a failed size counts too).
    pub summary: ServerSummary,
    pub error: Option<String>,
    /// The event that ended the connection (Terminate sent or received, close).
    pub event: Option<AsyncEvent>,
}

impl ServerEnd {
    /// The summary, or the error that ended the connection with what it saw
    /// before (so a failed connection's wrong octets are still counted where
    /// its error is reported).
    pub(crate) fn into_result(self) -> Result<ServerSummary, String> {
        let s = &self.summary;
        match &self.error {
            None => Ok(self.summary),
            Some(e) => Err(format!(
                "{e} (before: {} sizes, {} messages, {} corrupt bytes)",
                s.sizes, s.messages, s.corrupt
            )),
        }
    }
}

/// A server on one connection, receives posted, waiting for the client's Hello.
pub(crate) struct Server {
    chan: Chan,
    opts: ServerOpts,
    sum: ServerSummary,
}

struct Run {
    op: Op,
    pingpong: bool,
    verify: bool,
    max: u32,
    /// The buffer advertised to the client.
    buf: MemoryRegion,
    /// Pattern source of ping-pong answers.
    src: MemoryRegion,
    /// The client's buffer (target of ping-pong Writes).
    peer: RemoteBuf,
    /// `--op mixed`: the connection's id in the pattern's keys, and its data
    /// Sends so far (the next one's sequence).
    conn: u64,
    sends: u64,
    /// Bandwidth Writes of the connection so far (the next one's sequence).
    writes: u64,
    /// Write bandwidth with --verify: the 8-octet source of the count of
    /// checked Writes written to the client (see `writes_until_end`).
    count: Option<MemoryRegion>,
}

impl Server {
    /// Take over `ep` and post the receive buffers, so the client may send Hello.
    pub(crate) fn new(ep: Endpoint, opts: ServerOpts) -> Result<Self, String> {
        let depth = opts.rx_depth.max(2);
        Ok(Self {
            chan: Chan::new(ep, CTRL_LEN, depth)?,
            opts,
            sum: ServerSummary::default(),
        })
    }

    /// Serve the client until its Bye; on failure, what was seen until then.
    pub(crate) async fn run(mut self) -> ServerEnd {
        let r = self.serve().await;
        let event = if r.is_err() {
            self.chan.end_event()
        } else {
            None
        };
        ServerEnd {
            summary: self.sum.clone(),
            error: r.err(),
            event,
        }
    }

    async fn serve(&mut self) -> Result<(), String> {
        let mut run = self.hello().await?;
        loop {
            match self.chan.recv_ctrl("the client's next size or Bye").await? {
                Msg::Begin { size, .. } => {
                    let (msgs, corrupt) = self.size(&mut run, size).await?;
                    self.sum.sizes += 1;
                    // Sends were counted as they came (see `sends`).
                    if run.op != Op::Send {
                        self.sum.messages += msgs;
                        self.sum.corrupt += corrupt;
                    }
                }
                Msg::Pad => {}
                Msg::Bye => break,
                m => return Err(format!("expected Begin or Bye, got {m:?}")),
            }
        }
        self.chan.drain().await?;
        self.chan.ep.qp.disconnect();
        // Our close must reach the client (it waits for it) before our queue
        // pair is dropped; its own close answers ours. Not an error if it does
        // not come: everything of the run has been verified by now.
        let _ = self
            .chan
            .wait_peer_close(std::time::Duration::from_secs(5))
            .await;
        Ok(())
    }

    async fn hello(&mut self) -> Result<Run, String> {
        let Msg::Hello {
            op,
            pingpong,
            verify,
            max_size,
            buf: peer,
            mailbox,
            conn,
        } = self.chan.recv_ctrl("the client's Hello").await?
        else {
            return Err("the client's first message is not Hello".into());
        };
        if max_size == 0 || max_size > super::opts::MAX_SIZE {
            return Err(format!("the client asks for {max_size}-octet messages"));
        }
        // Verified Write bandwidth: each Write has a slot of its own, checked
        // before the client may write it again.
        let checks = op == Op::Write && verify && !pingpong;
        let reg = |len: usize, access| {
            self.chan
                .ep
                .pd
                .register(vec![0; len], access)
                .map_err(|e| format!("registering {len} octets: {e}"))
        };
        let slots = if checks {
            super::bw::write_slots(max_size)
        } else {
            1
        };
        let buf = reg(
            slots * max_size as usize,
            Access::REMOTE_WRITE | Access::REMOTE_READ,
        )?;
        let src = reg(max_size as usize, Access::NONE)?;
        let count = if checks {
            // At least one check word (each Written is checked for its own).
            if peer.len < CHECK_LEN {
                return Err(format!(
                    "the client's buffer is {} octets; {CHECK_LEN} are needed",
                    peer.len
                ));
            }
            Some(reg(8, Access::NONE)?)
        } else {
            None
        };
        // No credits in a ping-pong (see the client).
        if !pingpong {
            self.chan.enable_grants(mailbox)?;
        }
        // The first Send: the 16-octet advertisement of the buffer.
        self.chan.send_raw(&buf.remote().to_bytes()).await?;
        Ok(Run {
            op,
            pingpong,
            verify,
            max: max_size,
            buf,
            src,
            peer,
            conn,
            sends: 0,
            writes: 0,
            count,
        })
    }

    /// One size: prepare, Ack, take the data until End, Result.
    async fn size(&mut self, run: &mut Run, size: u32) -> Result<(u64, u64), String> {
        if size == 0 || size > run.max {
            return Err(format!(
                "the client asks for size {size}, above its own {}",
                run.max
            ));
        }
        let copies = Copies::of(&self.chan.ep.qp.stats());
        let n = size as usize;
        let e = |e: rddp::Error| e.to_string();
        // The buffer's contents matter only to --verify and to ping-pong's
        // marker (with thousands of queue pairs, filling them all is in the
        // measured time).
        match run.op {
            Op::Write if run.verify || run.pingpong => run.buf.write(0, &vec![0; n]).map_err(e)?,
            Op::Read if run.verify => {
                let key = Key::new(run.conn, space::SERVED | u64::from(size));
                run.buf.write(0, &key.fill(n)).map_err(e)?
            }
            Op::Write | Op::Read => {}
            Op::Send | Op::Mixed => {
                // Send bandwidth: large messages into one buffer, as perftest's.
                let one = run.op == Op::Send && !run.pingpong && !run.verify;
                self.chan.set_recv_len(n, self.opts.rx_depth, one)?
            }
        }
        if run.pingpong {
            run.src.write(0, &pattern::fill(size, n)).map_err(e)?;
        }
        let pad = if matches!(run.op, Op::Send | Op::Mixed) {
            self.chan.stale_below(n.max(CTRL_LEN))
        } else {
            0
        };
        let granted = self.chan.posted_total();
        self.chan.send_ctrl(&Msg::Ack { granted, pad }).await?;
        let (msgs, mut corrupt) = match (run.op, run.pingpong) {
            (Op::Write, true) => {
                let i =
                    lat::server_write(&mut self.chan, &run.src, &run.buf, run.peer, size).await?;
                (i, 0)
            }
            (Op::Send | Op::Mixed, _) => self.sends(run, size).await?,
            (Op::Write, false) if run.count.is_some() => self.writes_until_end(run, size).await?,
            _ => (self.wait_end().await?, 0),
        };
        if run.verify && run.op == Op::Write && run.pingpong {
            // The last octet is the marker, not pattern.
            let got = run.buf.read(0, u64::from(size - 1)).map_err(e)?;
            corrupt += pattern::corrupt(size, &got);
        }
        if run.op == Op::Write {
            run.writes += msgs;
        }
        let granted = self.chan.posted_total();
        let copied = Copies::since(Copies::of(&self.chan.ep.qp.stats()), copies);
        self.chan
            .send_ctrl(&Msg::Result {
                corrupt,
                received: msgs,
                granted,
                rx_copied: copied.rx,
                tx_copied: copied.tx,
            })
            .await?;
        Ok((msgs, corrupt))
    }

    async fn wait_end(&mut self) -> Result<u64, String> {
        loop {
            match self.chan.recv_ctrl("the client's End").await? {
                Msg::End { iters } => return Ok(iters),
                Msg::Pad => {}
                m => return Err(format!("expected End, got {m:?}")),
            }
        }
    }

    /// Write bandwidth with --verify: check each Write at its `Written` (its
    /// slot holds its octets until the client hears of the check), then write
    /// the count of the connection's Writes checked into the slot's check word
    /// of the client's buffer (a word per slot: see [`super::bw::Slots`]).
    /// Until End.
    async fn writes_until_end(&mut self, run: &mut Run, size: u32) -> Result<(u64, u64), String> {
        let Some(count) = run.count.as_ref() else {
            return Err("Write checks without their count buffer".into());
        };
        let (mut msgs, mut corrupt) = (0u64, 0u64);
        loop {
            let m = self.chan.recv_ctrl("the client's Writes").await;
            let m = m.map_err(|e| format!("{e} (after {msgs} Writes of {size} octets checked)"))?;
            match m {
                Msg::Written { at } => {
                    let len = run.buf.len();
                    if at.checked_add(u64::from(size)).is_none_or(|end| end > len)
                        || !at.is_multiple_of(u64::from(size.max(1)))
                    {
                        return Err(format!(
                            "a Write of {size} octets at {at}, not a slot of the {len}-octet buffer"
                        ));
                    }
                    let word = at / u64::from(size.max(1)) * CHECK_LEN;
                    if word + CHECK_LEN > run.peer.len {
                        return Err(format!(
                            "a Write into slot {} has no check word in the client's {}-octet buffer",
                            word / CHECK_LEN,
                            run.peer.len
                        ));
                    }
                    let key = Key::new(run.conn, space::WRITE | (run.writes + msgs));
                    let got = run
                        .buf
                        .read(at, u64::from(size))
                        .map_err(|e| e.to_string())?;
                    let bad = key.check(&got);
                    if bad.count > 0 {
                        eprintln!(
                            "rddp perf server: connection {:#x}: Write {} of {size} octets: \
                             {} octets wrong, from +{} to +{}",
                            run.conn,
                            run.writes + msgs,
                            bad.count,
                            bad.first,
                            bad.last
                        );
                    }
                    corrupt += bad.count;
                    msgs += 1;
                    let to = remote_at(run.peer, word);
                    self.chan.write_count(count, run.writes + msgs, to)?;
                }
                Msg::Pad => {}
                Msg::End { iters } if iters == msgs => return Ok((msgs, corrupt)),
                Msg::End { iters } => {
                    return Err(format!(
                        "the client wrote {iters} Writes of {size} octets; {msgs} were told of"
                    ));
                }
                m => return Err(format!("expected Written or End, got {m:?}")),
            }
        }
    }

    /// Take data Sends until End, answering each with ping-pong.
    async fn sends(&mut self, run: &mut Run, size: u32) -> Result<(u64, u64), String> {
        if run.pingpong {
            self.chan.signal_every(lat::SIGNAL_EVERY);
        }
        let got = self.sends_until_end(run, size).await;
        self.chan.signal_every(1);
        got
    }

    async fn sends_until_end(&mut self, run: &mut Run, size: u32) -> Result<(u64, u64), String> {
        let (mut msgs, mut corrupt) = (0, 0);
        loop {
            match self.chan.recv("the client's Sends").await? {
                Incoming::Data(d) => {
                    let bad = if run.verify && run.op == Op::Mixed {
                        // Random lengths, each its own message of the
                        // connection's pattern: Sends arrive in order.
                        let key = Key::new(run.conn, space::SEND | run.sends);
                        run.sends += 1;
                        let bad = key.check(&d);
                        if bad.count > 0 {
                            eprintln!(
                                "rddp perf server: connection {:#x}: Send {} of {} octets: \
                                 {} octets wrong, from +{} to +{}",
                                run.conn,
                                key.seq & !space::SEND,
                                d.len(),
                                bad.count,
                                bad.first,
                                bad.last
                            );
                        }
                        bad.count
                    } else if run.verify && !run.pingpong {
                        // Bandwidth: each Send its own key, in order.
                        let key = Key::new(run.conn, space::SEND | run.sends);
                        run.sends += 1;
                        key.check(&d).count + u64::from(size).abs_diff(d.len() as u64)
                    } else if run.verify {
                        lat::corrupt_msg(size, &d)
                    } else {
                        0
                    };
                    msgs += 1;
                    corrupt += bad;
                    self.sum.messages += 1;
                    self.sum.corrupt += bad;
                    self.chan.recycle(d);
                    if run.pingpong {
                        self.chan.send_data(&run.src, u64::from(size)).await?;
                    }
                }
                Incoming::Ctrl(Msg::Pad) => {}
                Incoming::Ctrl(Msg::End { .. }) => return Ok((msgs, corrupt)),
                Incoming::Ctrl(m) => return Err(format!("expected data or End, got {m:?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::client::Client;
    use crate::perf::exec;
    use crate::perf::opts::{ClientOpts, Stop};
    use rddp::Device;
    use rddp::transport::memory_pair;

    fn pair(dev: &Device) -> (Endpoint, Endpoint) {
        let (a, b) = memory_pair(4096);
        (
            Endpoint::attach(dev, "client", a).unwrap(),
            Endpoint::attach(dev, "server", b).unwrap(),
        )
    }

    #[test]
    fn a_peer_that_does_not_say_hello_is_an_error_not_a_hang() {
        let dev = Device::new();
        let (c, s) = pair(&dev);
        let server = Server::new(s, ServerOpts { rx_depth: 4 }).unwrap();
        let t = exec::runtime().spawn(server.run());
        let mut chan = Chan::new(c, CTRL_LEN, 4).unwrap();
        exec::block_on(chan.send_ctrl(&Msg::Bye)).unwrap();
        let err = exec::block_on(t).unwrap().error.unwrap();
        assert!(err.contains("not Hello"), "{err}");
    }

    #[test]
    fn a_server_without_the_advertisement_is_refused() {
        let dev = Device::new();
        let (c, s) = pair(&dev);
        // A "server" that answers Hello with 10 octets instead of 16.
        let t = exec::runtime().spawn(async move {
            let mut chan = Chan::new(s, CTRL_LEN, 4).unwrap();
            let _ = chan.recv_ctrl("Hello").await;
            chan.send_raw(&[0; 10]).await.unwrap();
            chan.drain().await.unwrap();
            chan
        });
        let opts = ClientOpts {
            op: Op::Write,
            sizes: vec![64],
            stop: Stop::Iters(1),
            pingpong: false,
            verify: false,
            tx_depth: 4,
            post_list: 1,
            plant_write: false,
        };
        let err = exec::block_on(Client::connect(c, &opts)).err().unwrap();
        assert!(err.contains("not the 16-octet advertisement"), "{err}");
        drop(exec::block_on(t));
    }
}
