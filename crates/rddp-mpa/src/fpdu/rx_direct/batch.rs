//! Batched receive of small FPDUs with no copy (docs/data-path.md,
//! "Receive"), for [`FpduReceiver::drive_buffered`].
//!
//! Header first costs a system call per FPDU; reading many small FPDUs at once
//! into a buffer and copying their payloads out costs a copy. A batch needs
//! neither:
//!
//! 1. one peek (`MSG_PEEK`) shows as many octets as the caller's buffer holds;
//! 2. for each whole FPDU there, in order: ULPDU_Length and the CRC are checked
//!    over the peeked octets (RFC 5044 §4.4; a TCP receive queue does not
//!    change under a peek, so they are the octets the read below moves), then
//!    the engine runs every check of the DDP segment and says where its payload
//!    goes ([`Placer::begin`] with `Begin::Ahead`; RFC 5041 §7.1: all before placement);
//! 3. one vectored read takes exactly those FPDUs: each payload straight into
//!    its region or receive buffer, every other octet (headers, PAD, CRC) back
//!    into the caller's buffer;
//! 4. [`Placer::finish`] for each, in order: only now is anything delivered.
//!
//! An FPDU that cannot join (a payload of [`SMALL_PAYLOAD`] octets or more, a
//! bad ULPDU_Length or CRC, one the engine would refuse or cannot begin ahead
//! of the ones before it, one cut off where the socket's octets end) ends the
//! batch and is then taken alone, header first: its errors are found and
//! reported there, after everything before it was delivered, as in order.
//!
//! Region targets: one region per batch (its lock held for the one read, as
//! for a single FPDU); their ranges lie apart, or a later Write of the batch
//! covers an earlier one whole: the earlier one's octets are then read into
//! the caller's buffer and dropped, never placed (what the region holds after
//! the batch is what placing both in order leaves; an RDMA Write has no
//! completion at the Data Sink, RFC 5040 §5.5, and the region is locked
//! for the whole read, so nobody sees the difference). Any other overlap ends
//! the batch before the later Write (it is not begun: `fits` of
//! [`Placer::begin`] with `Begin::Ahead` says no).
//! Markers towards us: no batches (every FPDU header first, no copy either;
//! about 3.5 reads an FPDU of 64 octets, where the copying read-ahead before
//! the batches took many FPDUs per read).

use super::*;
use rddp_proto::mem::RegionRef;
use rddp_wire::crc::crc32c;
use std::sync::Arc;

/// FPDUs at most in one batch: two iovecs each and one more stay under
/// IOV_MAX (1024).
const MAX_BATCH: usize = 256;

/// One whole FPDU of the peek, begun: offsets into the caller's buffer (it
/// starts where the one before it ends, the first at 0).
struct Item {
    payload_at: usize,
    payload_end: usize,
    end: usize,
    target: Target,
    /// A Write whose range a later Write of the batch covers: read, not placed.
    superseded: bool,
}

/// What the peek shows at an FPDU's start.
enum Peeked {
    /// Nothing more was peeked.
    End,
    /// The FPDU goes on past the peeked octets.
    Short,
    /// Whole, its CRC good, its payload small: (header length, payload
    /// length, FPDU length).
    Whole(usize, usize, usize),
    /// Not for a batch (a large payload, a bad ULPDU_Length or CRC).
    No,
}

fn peeked(cfg: &RxConfig, b: &[u8]) -> Peeked {
    if b.is_empty() {
        return Peeked::End;
    }
    if b.len() < SAFE_HEAD {
        return Peeked::Short;
    }
    // A bad ULPDU_Length is reported by the header-first read that follows.
    let Ok(ulpdu) = check::ulpdu_len([b[0], b[1]], cfg.max_ulpdu) else {
        return Peeked::No;
    };
    let hl = DdpControl(b[MPA_HDR_LEN]).header_len();
    let Some(payload) = ulpdu.checked_sub(hl).filter(|&p| p < SMALL_PAYLOAD) else {
        return Peeked::No;
    };
    let covered = check::covered_len(ulpdu);
    let total = covered + MPA_CRC_LEN;
    let Some(crc) = b.get(covered..total) else {
        return Peeked::Short;
    };
    // A bad CRC too: the FPDU is taken alone, header first, and fails there.
    if cfg.crc
        && check::crc(
            true,
            [crc[0], crc[1], crc[2], crc[3]],
            crc32c(&b[..covered]),
        )
        .is_err()
    {
        return Peeked::No;
    }
    Peeked::Whole(hl, payload, total)
}

fn region_range(t: &Target) -> Option<(&RegionRef, usize, usize)> {
    match t {
        Target::Region {
            region,
            offset,
            len,
        } => Some((region, *offset, *len)),
        _ => None,
    }
}

/// Whether the batch's one read can take target `t` after `items`: a region
/// range in the batch's one region (`region`, if it has one yet), apart from
/// each earlier Write or covering it whole; and whether it covers one.
fn fit(t: &Target, region: Option<&RegionRef>, items: &[Item]) -> (bool, bool) {
    let Some((r, o, l)) = region_range(t) else {
        return (true, false);
    };
    if !region.is_none_or(|g| Arc::ptr_eq(g, r)) {
        return (false, false);
    }
    let (mut clash, mut covered) = (false, false);
    for it in items.iter().filter(|it| !it.superseded) {
        if let Some((_, io, il)) = region_range(&it.target) {
            let apart = io + il <= o || o + l <= io;
            let covers = o <= io && io + il <= o + l;
            covered |= covers;
            clash |= !apart && !covers;
        }
    }
    (!clash, covered)
}

/// The read's buffers, in stream order: non-payload octets (and superseded
/// payloads) into `ra` at their own offsets, payloads into `region`'s octets
/// or the receive buffers `bufs` (the Buffer targets', in order).
fn iovecs<'a>(
    mut ra: &'a mut [u8],
    items: &[Item],
    region: Option<&'a mut [u8]>,
    bufs: &'a mut [&mut [u8]],
) -> io::Result<Vec<IoSliceMut<'a>>> {
    let bug = || io::Error::other("batch: targets do not match the begun FPDUs");
    // The region's pieces, apart by construction: cut in offset order.
    let mut pieces: Vec<Option<&'a mut [u8]>> = (0..items.len()).map(|_| None).collect();
    if let Some(mut rest) = region {
        let mut order: Vec<(usize, usize, usize)> = items
            .iter()
            .enumerate()
            .filter(|(_, it)| !it.superseded)
            .filter_map(|(i, it)| region_range(&it.target).map(|(_, o, l)| (o, l, i)))
            .collect();
        order.sort_unstable();
        let mut base = 0;
        for (o, l, i) in order {
            let skip = o.checked_sub(base).ok_or_else(bug)?;
            let (_, t) = std::mem::take(&mut rest)
                .split_at_mut_checked(skip)
                .ok_or_else(bug)?;
            let (piece, t) = t.split_at_mut_checked(l).ok_or_else(bug)?;
            pieces[i] = Some(piece);
            (rest, base) = (t, o + l);
        }
    }
    let mut bufs = bufs.iter_mut();
    let mut iov = Vec::with_capacity(2 * items.len() + 1);
    let mut pos = 0;
    for (i, it) in items.iter().enumerate() {
        let (scratch, t) = std::mem::take(&mut ra)
            .split_at_mut_checked(it.payload_at - pos)
            .ok_or_else(bug)?;
        let (own, t) = t
            .split_at_mut_checked(it.payload_end - it.payload_at)
            .ok_or_else(bug)?;
        (ra, pos) = (t, it.payload_end);
        iov.push(IoSliceMut::new(scratch));
        match &it.target {
            Target::Nothing => {}
            // Superseded, or application memory (no region octets given):
            // into the caller's buffer at its own offsets.
            Target::Region { .. } if it.superseded || pieces[i].is_none() => {
                iov.push(IoSliceMut::new(own));
            }
            Target::Region { .. } => iov.push(IoSliceMut::new(pieces[i].take().ok_or_else(bug)?)),
            Target::Buffer { len } => {
                let b = bufs.next().ok_or_else(bug)?;
                if b.len() != *len {
                    return Err(bug());
                }
                iov.push(IoSliceMut::new(b));
            }
        }
    }
    let end = items.last().map_or(0, |it| it.end);
    let (scratch, _) = ra.split_at_mut_checked(end - pos).ok_or_else(bug)?;
    iov.push(IoSliceMut::new(scratch));
    Ok(iov)
}

/// Read exactly what the buffers hold (octets that were peeked: all there).
fn read_all(src: &mut impl Read, mut iov: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
    let want: usize = iov.iter().map(|b| b.len()).sum();
    let mut got = 0;
    while got < want {
        match src.read_vectored(iov) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                got += n;
                IoSliceMut::advance_slices(&mut iov, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io::Error::other(format!("peeked octets not readable: {e}"))),
        }
    }
    Ok(got)
}

impl FpduReceiver {
    /// Before a batch's or a lone Send's read: the engine takes more, and the
    /// source may have octets (a short read did not show it empty).
    pub(super) fn may_read(&self, engine: &mut impl Placer) -> Result<(), Halt> {
        if !engine.more() {
            return Err(Halt::Pause);
        }
        if self.input.drained {
            return Err(Halt::Block);
        }
        Ok(())
    }

    /// One batch: peek, begin, one read, finish. Takes at least one FPDU, or
    /// marks the next one to be taken alone.
    pub(super) fn batch(
        &mut self,
        src: &mut (impl Read + Peek),
        engine: &mut impl Placer,
    ) -> Result<(), Halt> {
        self.may_read(engine)?;
        let n = loop {
            match src.peek(&mut self.input.ra) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Halt::Block),
                Err(e) => return Err(Halt::Io(e)),
            }
        };
        let full = n == self.input.ra.len();
        let mut items: Vec<Item> = Vec::new();
        let mut region: Option<RegionRef> = None;
        let (mut at, mut alone) = (0, false);
        while items.len() < MAX_BATCH && engine.more() {
            let (hl, payload_len, total) = match peeked(&self.cfg, &self.input.ra[at..n]) {
                Peeked::Whole(hl, p, t) => (hl, p, t),
                Peeked::End => break,
                // Cut off by the buffer's end: the next batch starts with it.
                Peeked::Short if full && !items.is_empty() => break,
                Peeked::Short | Peeked::No => {
                    alone = true;
                    break;
                }
            };
            let head = &self.input.ra[at + MPA_HDR_LEN..at + MPA_HDR_LEN + hl];
            let seq = self.seq + items.len() as u64;
            // Whether the batch's one read can take the target, and whether
            // it covers an earlier Write of the batch whole.
            let (mut unfit, mut covers) = (false, false);
            let mut fits = |t: &Target| {
                let (ok, c) = fit(t, region.as_ref(), &items);
                (unfit, covers) = (!ok, c);
                ok
            };
            let target = match engine.begin(seq, head, payload_len, Begin::Ahead(&mut fits)) {
                Ok(t) if t.len() == payload_len => t,
                Ok(_) => {
                    // An engine bug; never write outside what it returned.
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "placement target does not match the payload length".into(),
                    );
                    return Err(self.die());
                }
                // The next batch starts with it.
                Err(_) if unfit => break,
                Err(_) => {
                    alone = true;
                    break;
                }
            };
            if let Some((r, o, l)) = region_range(&target) {
                region.get_or_insert_with(|| r.clone());
                if covers {
                    for it in items.iter_mut() {
                        if let Some((_, io, il)) = region_range(&it.target)
                            && o <= io
                            && io + il <= o + l
                        {
                            it.superseded = true;
                        }
                    }
                }
            }
            let payload_at = at + MPA_HDR_LEN + hl;
            items.push(Item {
                payload_at,
                payload_end: payload_at + payload_len,
                end: at + total,
                target,
                superseded: false,
            });
            at += total;
        }
        if items.is_empty() {
            self.input.alone = true;
            return Ok(());
        }
        self.place(src, engine, &items, region.as_ref())?;
        self.advance(at);
        for it in &items {
            self.seq += 1;
            if !it.superseded {
                self.placed += it.target.len() as u64;
            }
            engine.finish(true);
        }
        self.input.alone = alone;
        // Everything the socket had was taken (a short peek): it is empty now.
        let emptied = at == n && !full;
        if emptied {
            self.input.drained = self.input.stream;
        }
        // A Send that came alone: the next may be read in one system call.
        self.lone.seen(match items.as_slice() {
            [it] if emptied => match it.target {
                Target::Buffer { len } => Some(len),
                _ => None,
            },
            _ => None,
        });
        Ok(())
    }

    /// The batch's one read (under `region`'s lock and inside the engine's
    /// receive buffers). An error here loses the connection: the begun FPDUs
    /// are never finished, so nothing of them is delivered.
    fn place(
        &mut self,
        src: &mut impl Read,
        engine: &mut impl Placer,
        items: &[Item],
        region: Option<&RegionRef>,
    ) -> Result<(), Halt> {
        let end = items.last().map_or(0, |it| it.end);
        let ra = &mut self.input.ra[..end];
        // Application memory is never borrowed (rddp-appmem): its payloads
        // are read into the caller's buffer, then copied into it, each one's
        // own octets (Region::data_mut would copy the whole region, twice),
        // counted as copied.
        let app = region.filter(|r| r.is_app_memory());
        let mut data = region.filter(|r| !r.is_app_memory()).map(|r| r.data_mut());
        let mut f = |bufs: &mut [&mut [u8]]| {
            let mut iov = iovecs(&mut *ra, items, data.as_deref_mut(), bufs)?;
            read_all(src, &mut iov)
        };
        let buffers = items
            .iter()
            .any(|it| matches!(it.target, Target::Buffer { .. }));
        let got = if buffers {
            engine
                .with_buffers(&mut f)
                .unwrap_or_else(|| Err(io::Error::other("batch: receive buffers gone")))
        } else {
            f(&mut [])
        };
        drop(data);
        match got {
            Ok(_) => {
                if let Some(r) = app {
                    for it in items.iter().filter(|it| !it.superseded) {
                        if let Target::Region { offset, .. } = &it.target {
                            let payload = &self.input.ra[it.payload_at..it.payload_end];
                            // An ended registration takes nothing, as for
                            // any copy into it.
                            if r.write_at(*offset, payload) {
                                self.input.copied += payload.len() as u64;
                            }
                        }
                    }
                }
                Ok(())
            }
            Err(e) => Err(Halt::Io(e)),
        }
    }
}
