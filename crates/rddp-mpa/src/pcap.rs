//! pcap stub (filled in below).
