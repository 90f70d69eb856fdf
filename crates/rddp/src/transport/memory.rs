//! An in-process LLP: two connected halves joined by channels, in order. For tests,
//! examples and the demo; a real deployment uses MPA/TCP or SCTP.

use super::{Connection, Inbound, Llp, LlpInfo, SegmentReader, SegmentWriter};
use rddp_proto::ddp::OutSegment;
use std::io;
use std::sync::mpsc::{Receiver, Sender, channel};

enum Msg {
    Segment(Vec<u8>),
    /// A graceful close: the reader sees `Closed`. (Dropping our sender is not
    /// enough: the peer's own `Sender` into the same channel keeps it open.)
    Close,
    /// An abortive close: the reader sees a lost connection.
    Reset,
    /// Our own side closed: our reader stops too (as a TCP shutdown would do).
    LocalClose,
}

struct Reader {
    rx: Receiver<Msg>,
    seq: u64,
}

struct Writer {
    tx: Option<Sender<Msg>>,
    /// Into our own reader's channel, to wake it when we close.
    own: Sender<Msg>,
}

impl SegmentReader for Reader {
    fn read(&mut self) -> io::Result<Inbound> {
        match self.rx.recv() {
            Ok(Msg::Segment(bytes)) => {
                let seq = self.seq;
                self.seq += 1;
                Ok(Inbound::Segment { seq, bytes })
            }
            Ok(Msg::Close) => Ok(Inbound::Closed),
            Ok(Msg::Reset) => Err(io::Error::from(io::ErrorKind::ConnectionReset)),
            Ok(Msg::LocalClose) => Err(io::Error::from(io::ErrorKind::ConnectionAborted)),
            Err(_) => Ok(Inbound::Closed),
        }
    }
}

impl SegmentWriter for Writer {
    fn write_segment(&mut self, seg: &OutSegment) -> io::Result<()> {
        let tx = self.tx.as_ref().ok_or(io::ErrorKind::NotConnected)?;
        tx.send(Msg::Segment(seg.to_vec()))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }

    fn close(&mut self, abortive: bool) {
        if let Some(tx) = self.tx.take() {
            if abortive {
                let _ = tx.send(Msg::Reset);
                let _ = self.own.send(Msg::LocalClose);
            } else {
                let _ = tx.send(Msg::Close);
            }
        }
    }
}

/// Two connected in-memory LLP endpoints with the given MULPDU and IRD = ORD = 16.
pub fn memory_pair(mulpdu: usize) -> (Connection, Connection) {
    let (a_tx, b_rx) = channel();
    let (b_tx, a_rx) = channel();
    let conn = |rx, tx: Sender<Msg>, own: Sender<Msg>| Connection {
        llp: Llp::Threads {
            abort: {
                let (peer, me) = (tx.clone(), own.clone());
                Box::new(move || {
                    let _ = peer.send(Msg::Reset);
                    let _ = me.send(Msg::LocalClose);
                })
            },
            reader: Box::new(Reader { rx, seq: 0 }),
            writer: Box::new(Writer { tx: Some(tx), own }),
        },
        mulpdu,
        ird: 16,
        ord: 16,
        ird_ord_negotiated: true,
        peer_private_data: Vec::new(),
        info: LlpInfo {
            transport: "memory",
            ..LlpInfo::default()
        },
        send_read_rtr: false,
    };
    let (a_own, b_own) = (b_tx.clone(), a_tx.clone());
    (conn(a_rx, a_tx, a_own), conn(b_rx, b_tx, b_own))
}
