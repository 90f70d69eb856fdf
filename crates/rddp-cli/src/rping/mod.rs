//! `rddp rping`: rdma-core's rping (librdmacm/examples/rping.c) on the wire, so
//! either end can be the stock `rping` over a kernel iWARP stack (siw):
//!
//! * the client advertises its start buffer in a 16-octet Send
//!   (`be64 addr || be32 rkey || be32 size`, rping's `struct rping_rdma_info`);
//! * the server RDMA Reads `size` octets from it, Sends a 16-octet go-ahead;
//! * the client advertises its sink the same way; the server RDMA Writes the data
//!   back (up to and including its NUL) and Sends the go-ahead again;
//! * the client, with `-V`, compares the sink with the start buffer.
//!
//! Flags are rping's where they apply (`-s|-c -a -p -C -S -v -V -d -P`); the MPA
//! knobs and the fault injection for interop tests are long options of our own.

mod args;
mod client;
mod server;
mod wire;

pub(crate) use args::RpingArgs;

/// One line on stderr saying what MPA setup agreed with the peer.
pub(crate) fn report_mpa(who: &str, c: &rddp::transport::Connection) {
    let i = &c.info;
    let onoff = |b: bool| if b { "on" } else { "off" };
    eprintln!(
        "{who}: connected to {}: MPA rev {}, CRC {}, Markers rx {} tx {}, IRD {} ORD {}{}",
        i.peer.map_or_else(|| "?".into(), |p| p.to_string()),
        i.mpa_rev.unwrap_or(0),
        onoff(i.crc),
        onoff(i.markers_rx),
        onoff(i.markers_tx),
        c.ird,
        c.ord,
        i.rtr
            .map_or_else(String::new, |r| format!(", peer-to-peer with a {r} RTR"))
    );
}

/// Run `rddp rping ...`.
pub(crate) fn run(a: &RpingArgs) -> Result<(), String> {
    a.check()?;
    let _cap = a.capture.start()?;
    if a.server {
        server::run(a)
    } else {
        client::run(a)
    }
}
