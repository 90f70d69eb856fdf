//! `rddp demo`: two DDP endpoints in one process, joined by the simulator's
//! reordering link, shown step by step. Every claim it prints is checked; a
//! failed check is an error (non-zero exit), never a silent pass.

use bytes::Bytes;
use rddp_proto::ddp::{DdpConfig, Delivery, RecvBuffer, StreamEvent};
use rddp_proto::mem::{Access, PdId, StagScope};
use rddp_sim::{LinkMode, Pair};
use rddp_wire::TerminateCode;

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("demo check failed: {what}"))
    }
}

pub fn run() -> Result<(), String> {
    let cfg = DdpConfig {
        mulpdu: 256,
        ..DdpConfig::default()
    };
    println!("rddp demo: two in-memory DDP endpoints, A (data source) and B (data sink)");
    println!(
        "  link: simulated LLP that delivers whole segments in random order with the sender's order attached (like SCTP)"
    );
    println!(
        "  MULPDU {} octets: tagged segments carry up to {} payload octets",
        cfg.mulpdu,
        cfg.mulpdu - 14
    );
    let mut p = Pair::new(2026, LinkMode::Reorder { window: 64 }, cfg);

    // 1. Registration.
    let len = 4096;
    let stag =
        p.b.mem
            .register(
                PdId(1),
                StagScope::Pd,
                Access::REMOTE_WRITE | Access::REMOTE_READ,
                0x10000,
                vec![0; len],
            )
            .map_err(|e| e.to_string())?;
    println!("\n[1] B registers {len} octets in protection domain 1 with remote read/write");
    println!(
        "    STag {stag} (index {} + random key {:#04x}), tagged offsets {:#x}..{:#x}",
        stag.index(),
        stag.key(),
        0x10000,
        0x10000 + len
    );

    // 2. Tagged write, placed out of order.
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    p.a.stream
        .send_tagged(0x40, stag.0, 0x10000, Bytes::from(data.clone()))
        .map_err(|e| e.to_string())?;
    p.run().map_err(|e| format!("{e:?}"))?;
    let st = p.b.stream.sink_stats();
    check(
        p.b.mem.region(stag).is_some_and(|r| r.data() == &data[..]),
        "tagged data placed",
    )?;
    println!("\n[2] A writes {len} octets to B's STag (a tagged DDP message)");
    println!(
        "    {} segments, {} of them placed before an earlier one had arrived; B's buffer matches byte for byte",
        st.segments_placed, st.placed_out_of_order
    );
    check(
        matches!(
            p.b.delivered.last(),
            Some(Delivery::Tagged { len: 4096, .. })
        ),
        "tagged delivery",
    )?;
    println!("    delivered once, in order, after every segment was placed");

    // 3. Untagged messages through the ordered receive queue.
    for id in 0..3 {
        p.b.stream
            .post_recv(
                0,
                RecvBuffer {
                    id,
                    data: vec![0; 1024],
                },
            )
            .map_err(|e| e.to_string())?;
    }
    let msgs = [
        "first message".to_string(),
        "second, longer message that needs two segments ".repeat(6),
        String::new(),
    ];
    for m in &msgs {
        p.a.stream
            .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(m.clone().into_bytes()))
            .map_err(|e| e.to_string())?;
    }
    p.run().map_err(|e| format!("{e:?}"))?;
    println!(
        "\n[3] B posts 3 receive buffers on queue 0; A sends 3 untagged messages (one of them empty)"
    );
    let got: Vec<(u32, u32)> =
        p.b.delivered
            .iter()
            .filter_map(|d| match d {
                Delivery::Untagged { msn, len, .. } => Some((*msn, *len)),
                _ => None,
            })
            .collect();
    let want: Vec<(u32, u32)> = msgs
        .iter()
        .zip(1..)
        .map(|(m, msn)| (msn, m.len() as u32))
        .collect();
    check(got == want, "untagged deliveries in MSN order")?;
    for (msn, len) in &got {
        println!("    delivered MSN {msn}: {len} octets");
    }

    // 4. An attack: a write past the end of the region.
    let before =
        p.b.mem
            .region(stag)
            .map(|r| r.data().to_vec())
            .unwrap_or_default();
    p.a.stream
        .send_tagged(
            0x40,
            stag.0,
            0x10000 + len as u64 - 8,
            Bytes::from_static(b"0123456789abcdef"),
        )
        .map_err(|e| e.to_string())?;
    p.run().map_err(|e| format!("{e:?}"))?;
    println!("\n[4] A writes 16 octets at 8 octets before the end of B's region");
    let err =
        p.b.error()
            .ok_or("demo check failed: the overflowing write was accepted")?;
    check(
        err.code == TerminateCode::DDP_BASE_BOUNDS,
        "bounds violation code",
    )?;
    println!("    refused before placement: {err}");
    let after =
        p.b.mem
            .region(stag)
            .map(|r| r.data().to_vec())
            .unwrap_or_default();
    check(
        before == after && p.b.mem.all_guards_intact(),
        "memory unchanged",
    )?;
    println!("    B's memory is unchanged and no guard octet around the region was touched");
    println!(
        "    B's stream is now erroneous: it accepts no more data until B's ULP tears it down"
    );
    p.b.stream.abort();
    p.b.collect();
    check(
        p.b.events
            .iter()
            .any(|e| matches!(e, StreamEvent::Closed { graceful: false })),
        "abortive close",
    )?;
    println!("    B's ULP asked for abortive teardown: stream closed");
    println!("\ndemo finished: every step above was checked");
    Ok(())
}
