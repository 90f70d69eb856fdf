//! Counters of one stream, kept by the engines where the work is done and read as
//! one plain struct (docs/features.md; what `rdma statistic` shows and siw keeps per QP).
//!
//! Every counter is a plain `u64` bumped by the engine that does the work: the DDP
//! source when it hands a segment to the LLP, the DDP sink when it places and
//! delivers, the DDP stream and RDMAP when they refuse a segment, RDMAP when a
//! Terminate leaves or arrives and when a completion comes out. Nothing here locks
//! or allocates; a driver reads a copy with [`crate::rdmap::RdmapStream::stats`].

use crate::rdmap::WcStatus;
use rddp_wire::TerminateCode;

/// What the DDP data source handed to the LLP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// DDP segments handed to the LLP.
    pub segments_sent: u64,
    /// Payload octets of those segments (DDP and RDMAP headers not counted, so
    /// that one side's `octets_sent` matches the other's `octets_placed`).
    pub octets_sent: u64,
    /// Messages whose last segment was handed to the LLP.
    pub messages_sent: u64,
    /// Payload octets copied out of region leases in user space on their way
    /// to the LLP (0 where the LLP writes from the region itself).
    pub octets_copied: u64,
}

/// Terminates counted by class: Layer and Error Type (RFC 5040 §4.8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TerminateClasses {
    /// RDMAP local catastrophic (0/0).
    pub rdmap_catastrophic: u64,
    /// RDMAP remote protection (0/1): STag, bounds, rights, invalidation.
    pub rdmap_protection: u64,
    /// RDMAP remote operation (0/2): version, opcode, IRD, stream errors.
    pub rdmap_operation: u64,
    /// DDP local catastrophic (1/0).
    pub ddp_catastrophic: u64,
    /// DDP tagged buffer (1/1).
    pub ddp_tagged: u64,
    /// DDP untagged buffer (1/2).
    pub ddp_untagged: u64,
    /// LLP (2/x): MPA CRC, Markers, RTR, IRD at setup, connection lost.
    pub llp: u64,
    /// A class no RFC defines, or a received Terminate that did not parse.
    pub other: u64,
}

impl TerminateClasses {
    /// Count one Terminate (`None`: one whose body did not parse).
    pub fn count(&mut self, code: Option<TerminateCode>) {
        let slot = match code.map(|c| (c.layer, c.etype)) {
            Some((0, 0)) => &mut self.rdmap_catastrophic,
            Some((0, 1)) => &mut self.rdmap_protection,
            Some((0, 2)) => &mut self.rdmap_operation,
            Some((1, 0)) => &mut self.ddp_catastrophic,
            Some((1, 1)) => &mut self.ddp_tagged,
            Some((1, 2)) => &mut self.ddp_untagged,
            Some((2, _)) => &mut self.llp,
            _ => &mut self.other,
        };
        *slot += 1;
    }

    /// All Terminates counted.
    pub fn total(&self) -> u64 {
        self.rdmap_catastrophic
            + self.rdmap_protection
            + self.rdmap_operation
            + self.ddp_catastrophic
            + self.ddp_tagged
            + self.ddp_untagged
            + self.llp
            + self.other
    }

    /// Named counters, in a fixed order (for tools printing them).
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("rdmap_catastrophic", self.rdmap_catastrophic),
            ("rdmap_protection", self.rdmap_protection),
            ("rdmap_operation", self.rdmap_operation),
            ("ddp_catastrophic", self.ddp_catastrophic),
            ("ddp_tagged", self.ddp_tagged),
            ("ddp_untagged", self.ddp_untagged),
            ("llp", self.llp),
            ("other", self.other),
        ]
    }

    fn add(&mut self, o: &Self) {
        self.rdmap_catastrophic += o.rdmap_catastrophic;
        self.rdmap_protection += o.rdmap_protection;
        self.rdmap_operation += o.rdmap_operation;
        self.ddp_catastrophic += o.ddp_catastrophic;
        self.ddp_tagged += o.ddp_tagged;
        self.ddp_untagged += o.ddp_untagged;
        self.llp += o.llp;
        self.other += o.other;
    }
}

/// Completions handed out, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletionCounts {
    /// [`WcStatus::Success`]: completed without error.
    pub success: u64,
    /// [`WcStatus::LocalLength`]: a message longer than its receive buffer.
    pub local_length: u64,
    /// [`WcStatus::LocalProtection`]: a local STag not usable for the request.
    pub local_protection: u64,
    /// [`WcStatus::LocalQpOperation`]: an RDMA Read on a stream with ORD 0.
    pub local_qp_operation: u64,
    /// [`WcStatus::RemoteAccess`]: the peer refused an access to its memory.
    pub remote_access: u64,
    /// [`WcStatus::RemoteOperation`]: the peer reported another error.
    pub remote_operation: u64,
    /// [`WcStatus::Flushed`]: handed back by teardown without running.
    pub flushed: u64,
    /// [`WcStatus::Fatal`]: a local catastrophic error.
    pub fatal: u64,
}

impl CompletionCounts {
    /// Count one completion of status `s`.
    pub fn count(&mut self, s: WcStatus) {
        *match s {
            WcStatus::Success => &mut self.success,
            WcStatus::LocalLength => &mut self.local_length,
            WcStatus::LocalProtection => &mut self.local_protection,
            WcStatus::LocalQpOperation => &mut self.local_qp_operation,
            WcStatus::RemoteAccess => &mut self.remote_access,
            WcStatus::RemoteOperation => &mut self.remote_operation,
            WcStatus::Flushed => &mut self.flushed,
            WcStatus::Fatal => &mut self.fatal,
        } += 1;
    }

    /// All completions counted.
    pub fn total(&self) -> u64 {
        self.fields().iter().map(|(_, n)| n).sum()
    }

    /// Named counters, in a fixed order (for tools printing them).
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("success", self.success),
            ("local_length", self.local_length),
            ("local_protection", self.local_protection),
            ("local_qp_operation", self.local_qp_operation),
            ("remote_access", self.remote_access),
            ("remote_operation", self.remote_operation),
            ("flushed", self.flushed),
            ("fatal", self.fatal),
        ]
    }

    fn add(&mut self, o: &Self) {
        self.success += o.success;
        self.local_length += o.local_length;
        self.local_protection += o.local_protection;
        self.local_qp_operation += o.local_qp_operation;
        self.remote_access += o.remote_access;
        self.remote_operation += o.remote_operation;
        self.flushed += o.flushed;
        self.fatal += o.fatal;
    }
}

/// RDMAP's own counters (the rest comes from DDP's source and sink).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RdmapCounters {
    pub segments_refused: u64,
    pub crc_errors: u64,
    pub terminates_sent: TerminateClasses,
    pub terminates_received: TerminateClasses,
    pub completions: CompletionCounts,
}

/// Everything counted on one stream (one queue pair).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// DDP segments handed to the LLP.
    pub segments_sent: u64,
    /// Payload octets of the segments handed to the LLP.
    pub octets_sent: u64,
    /// Messages whose last segment was handed to the LLP (Terminate, Read
    /// Requests and Read Responses included).
    pub messages_sent: u64,
    /// Received segments placed (tagged into a region, untagged into a buffer).
    pub segments_placed: u64,
    /// Payload octets placed.
    pub octets_placed: u64,
    /// Segments placed while an earlier one (in the sender's order) was missing.
    pub placed_out_of_order: u64,
    /// Messages delivered in order (RDMAP's own Read Requests included).
    pub messages_delivered: u64,
    /// Received segments refused by validation (DDP or RDMAP) before placement.
    pub segments_refused: u64,
    /// FPDUs whose MPA CRC did not match (each ends the stream with 2/0/0x02).
    pub crc_errors: u64,
    /// System calls that wrote to the LLP (`sendmsg` over MPA; one carries
    /// several FPDUs when several wait). Counted by the transport, not by
    /// the protocol core (whose own figure is 0); 0 over SCTP.
    pub llp_writes: u64,
    /// System calls that read from the LLP and returned octets (reads,
    /// vectored reads and peeks over MPA: a batch of small FPDUs costs a peek
    /// and a read, a lone Send one read); calls that found nothing are not
    /// counted. By the transport, as `llp_writes`.
    pub llp_reads: u64,
    /// Received payload octets copied in user space on their way to their
    /// final place (a region range or a receive buffer), by the engines or the
    /// LLP: 0 where the LLP reads payloads straight into place. RDMAP's own
    /// small messages are not payload and not counted.
    pub rx_copied_octets: u64,
    /// Payload octets copied out of region leases in user space on their way
    /// to the LLP: 0 where the LLP writes from the region itself.
    pub tx_copied_octets: u64,
    /// Terminates this side sent, by class.
    pub terminates_sent: TerminateClasses,
    /// Terminates received from the peer, by class.
    pub terminates_received: TerminateClasses,
    /// Completions handed to the ULP, by status.
    pub completions: CompletionCounts,
}

impl StreamStats {
    /// Add `o` to these counters (totals over streams).
    pub fn add(&mut self, o: &Self) {
        self.segments_sent += o.segments_sent;
        self.octets_sent += o.octets_sent;
        self.messages_sent += o.messages_sent;
        self.segments_placed += o.segments_placed;
        self.octets_placed += o.octets_placed;
        self.placed_out_of_order += o.placed_out_of_order;
        self.messages_delivered += o.messages_delivered;
        self.segments_refused += o.segments_refused;
        self.crc_errors += o.crc_errors;
        self.llp_writes += o.llp_writes;
        self.llp_reads += o.llp_reads;
        self.rx_copied_octets += o.rx_copied_octets;
        self.tx_copied_octets += o.tx_copied_octets;
        self.terminates_sent.add(&o.terminates_sent);
        self.terminates_received.add(&o.terminates_received);
        self.completions.add(&o.completions);
    }

    /// What happened between `earlier` and these counters (both of one stream).
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let t = |a: &TerminateClasses, b: &TerminateClasses| TerminateClasses {
            rdmap_catastrophic: d(a.rdmap_catastrophic, b.rdmap_catastrophic),
            rdmap_protection: d(a.rdmap_protection, b.rdmap_protection),
            rdmap_operation: d(a.rdmap_operation, b.rdmap_operation),
            ddp_catastrophic: d(a.ddp_catastrophic, b.ddp_catastrophic),
            ddp_tagged: d(a.ddp_tagged, b.ddp_tagged),
            ddp_untagged: d(a.ddp_untagged, b.ddp_untagged),
            llp: d(a.llp, b.llp),
            other: d(a.other, b.other),
        };
        let (a, b) = (&self.completions, &earlier.completions);
        Self {
            segments_sent: d(self.segments_sent, earlier.segments_sent),
            octets_sent: d(self.octets_sent, earlier.octets_sent),
            messages_sent: d(self.messages_sent, earlier.messages_sent),
            segments_placed: d(self.segments_placed, earlier.segments_placed),
            octets_placed: d(self.octets_placed, earlier.octets_placed),
            placed_out_of_order: d(self.placed_out_of_order, earlier.placed_out_of_order),
            messages_delivered: d(self.messages_delivered, earlier.messages_delivered),
            segments_refused: d(self.segments_refused, earlier.segments_refused),
            crc_errors: d(self.crc_errors, earlier.crc_errors),
            llp_writes: d(self.llp_writes, earlier.llp_writes),
            llp_reads: d(self.llp_reads, earlier.llp_reads),
            rx_copied_octets: d(self.rx_copied_octets, earlier.rx_copied_octets),
            tx_copied_octets: d(self.tx_copied_octets, earlier.tx_copied_octets),
            terminates_sent: t(&self.terminates_sent, &earlier.terminates_sent),
            terminates_received: t(&self.terminates_received, &earlier.terminates_received),
            completions: CompletionCounts {
                success: d(a.success, b.success),
                local_length: d(a.local_length, b.local_length),
                local_protection: d(a.local_protection, b.local_protection),
                local_qp_operation: d(a.local_qp_operation, b.local_qp_operation),
                remote_access: d(a.remote_access, b.remote_access),
                remote_operation: d(a.remote_operation, b.remote_operation),
                flushed: d(a.flushed, b.flushed),
                fatal: d(a.fatal, b.fatal),
            },
        }
    }

    /// The plain counters by name, in a fixed order (the class and status
    /// breakdowns are in `terminates_*` and `completions`).
    pub fn fields(&self) -> [(&'static str, u64); 13] {
        [
            ("segments_sent", self.segments_sent),
            ("octets_sent", self.octets_sent),
            ("messages_sent", self.messages_sent),
            ("segments_placed", self.segments_placed),
            ("octets_placed", self.octets_placed),
            ("placed_out_of_order", self.placed_out_of_order),
            ("messages_delivered", self.messages_delivered),
            ("segments_refused", self.segments_refused),
            ("crc_errors", self.crc_errors),
            ("llp_writes", self.llp_writes),
            ("llp_reads", self.llp_reads),
            ("rx_copied_octets", self.rx_copied_octets),
            ("tx_copied_octets", self.tx_copied_octets),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminates_fall_into_their_layer_and_type() {
        let mut t = TerminateClasses::default();
        t.count(Some(TerminateCode::DDP_BASE_BOUNDS));
        t.count(Some(TerminateCode::DDP_INVALID_MSN_NO_BUFFER));
        t.count(Some(TerminateCode::RDMAP_ACCESS_VIOLATION));
        t.count(Some(TerminateCode::RDMAP_CATASTROPHIC_STREAM));
        t.count(Some(TerminateCode::MPA_CRC_ERROR));
        t.count(Some(TerminateCode::RDMAP_LOCAL_CATASTROPHIC));
        t.count(None);
        assert_eq!(
            (t.ddp_tagged, t.ddp_untagged, t.rdmap_protection),
            (1, 1, 1)
        );
        assert_eq!((t.rdmap_operation, t.llp, t.rdmap_catastrophic), (1, 1, 1));
        assert_eq!((t.other, t.ddp_catastrophic, t.total()), (1, 0, 7));
    }

    #[test]
    fn totals_add_and_deltas_subtract() {
        let mut a = StreamStats {
            octets_sent: 10,
            ..StreamStats::default()
        };
        a.completions.count(WcStatus::Flushed);
        a.completions.count(WcStatus::LocalQpOperation);
        let mut sum = a;
        sum.add(&a);
        assert_eq!((sum.octets_sent, sum.completions.flushed), (20, 2));
        assert_eq!(sum.completions.local_qp_operation, 2);
        let d = sum.since(&a);
        assert_eq!(d, a);
        assert_eq!(sum.completions.total(), 4);
    }
}
