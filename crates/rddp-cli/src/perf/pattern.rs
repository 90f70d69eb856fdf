//! The patterned payload of --verify.
//!
//! [`Key`]: every octet depends on the connection, the message's sequence and
//! its offset, so an octet of another message, a stale message or the right
//! message at a wrong place differs (with probability 255/256 each). The
//! bandwidth modes' older pattern keyed by the size alone ([`byte`], [`fill`],
//! [`corrupt`]) tells only a misplaced, truncated or corrupted octet.

/// Sequence spaces of one connection, so the Writes, Sends, Reads' poison and
/// other octets of a connection never share a key.
pub(crate) mod space {
    /// Writes: `WRITE | n`, the connection's n-th Write.
    pub(crate) const WRITE: u64 = 1 << 60;
    /// Sends: `SEND | n`, the connection's n-th data Send (counted by both ends).
    pub(crate) const SEND: u64 = 2 << 60;
    /// What a Read sink holds before the Read's octets land: `POISON | n`.
    pub(crate) const POISON: u64 = 3 << 60;
    /// The server's buffer for a size of Read bandwidth: `SERVED | size`.
    pub(crate) const SERVED: u64 = 4 << 60;
}

/// Whose message (a connection's id) and which (its sequence): the pattern's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub conn: u64,
    pub seq: u64,
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer: every input bit moves about half the output bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Key {
    pub(crate) fn new(conn: u64, seq: u64) -> Self {
        Self { conn, seq }
    }

    fn base(self) -> u64 {
        mix(mix(self.conn ^ 0x5851_f42d_4c95_7f2d).wrapping_add(self.seq.wrapping_mul(GOLDEN)))
    }

    /// The eight octets at offsets `8 i .. 8 i + 8`.
    fn word(base: u64, i: u64) -> [u8; 8] {
        mix(base ^ i.wrapping_add(1).wrapping_mul(GOLDEN)).to_le_bytes()
    }

    /// The octet at `offset`.
    #[cfg(test)]
    pub(crate) fn byte(self, offset: u64) -> u8 {
        Self::word(self.base(), offset / 8)[(offset % 8) as usize]
    }

    /// Fill `out` with the octets from offset 0.
    pub(crate) fn fill_into(self, out: &mut [u8]) {
        let base = self.base();
        for (i, c) in out.chunks_mut(8).enumerate() {
            let w = Self::word(base, i as u64);
            c.copy_from_slice(&w[..c.len()]);
        }
    }

    /// `len` octets from offset 0.
    pub(crate) fn fill(self, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.fill_into(&mut v);
        v
    }

    /// How many octets of `data` (from offset 0) differ from the pattern, and
    /// the first and last that do.
    pub(crate) fn check(self, data: &[u8]) -> Wrong {
        let base = self.base();
        let mut w = Wrong::default();
        for (i, c) in data.chunks(8).enumerate() {
            let want = Self::word(base, i as u64);
            if c == &want[..c.len()] {
                continue;
            }
            for (j, (g, x)) in c.iter().zip(want).enumerate() {
                if *g != x {
                    w.note(i * 8 + j);
                }
            }
        }
        w
    }
}

/// Wrong octets found by a check: how many, the first and the last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wrong {
    pub count: u64,
    pub first: usize,
    pub last: usize,
}

impl Wrong {
    fn note(&mut self, at: usize) {
        if self.count == 0 {
            self.first = at;
        }
        self.last = at;
        self.count += 1;
    }

    /// Compare `got` with `want` octet by octet (a shorter one: the missing
    /// octets are wrong).
    pub(crate) fn between(got: &[u8], want: &[u8]) -> Self {
        let mut w = Self::default();
        for (i, c) in got.chunks(8).zip(want.chunks(8)).enumerate() {
            if c.0 == c.1 {
                continue;
            }
            for (j, (g, x)) in c.0.iter().zip(c.1).enumerate() {
                if g != x {
                    w.note(i * 8 + j);
                }
            }
        }
        for at in got.len().min(want.len())..got.len().max(want.len()) {
            w.note(at);
        }
        w
    }
}

/// The octet at `offset` of the pattern for `seed`.
pub(crate) fn byte(seed: u32, offset: usize) -> u8 {
    let x = (offset as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(seed.wrapping_mul(40_503))
        .wrapping_add(offset as u32 >> 8);
    (x >> 24) as u8
}

/// `len` octets of the pattern for `seed`.
pub(crate) fn fill(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| byte(seed, i)).collect()
}

/// How many octets of `data` differ from the pattern for `seed`.
pub(crate) fn corrupt(seed: u32, data: &[u8]) -> u64 {
    data.iter()
        .enumerate()
        .filter(|&(i, &b)| b != byte(seed, i))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_checks_itself_and_catches_changes() {
        let mut d = fill(4096, 4096);
        assert_eq!(corrupt(4096, &d), 0);
        d[17] ^= 1;
        d[4000] = d[4000].wrapping_add(3);
        assert_eq!(corrupt(4096, &d), 2);
        // Another seed (size) gives another pattern, so a stale buffer shows.
        assert!(corrupt(64, &fill(4096, 64)) > 32);
    }

    #[test]
    fn zeroes_are_not_the_pattern() {
        assert!(corrupt(65536, &[0; 1024]) > 1000);
    }

    #[test]
    fn a_keyed_pattern_checks_itself() {
        let k = Key::new(7, space::SEND | 3);
        for len in [0, 1, 7, 8, 9, 4096, 4099] {
            let d = k.fill(len);
            assert_eq!(k.check(&d), Wrong::default(), "{len}");
            assert!(d.iter().enumerate().all(|(i, &b)| b == k.byte(i as u64)));
        }
    }

    #[test]
    fn a_keyed_pattern_shows_every_wrong_octet_and_where() {
        let k = Key::new(1 << 32, space::WRITE | 12);
        let mut d = k.fill(1000);
        d[17] ^= 1;
        d[900] = d[900].wrapping_add(3);
        let w = k.check(&d);
        assert_eq!((w.count, w.first, w.last), (2, 17, 900));
    }

    /// Another connection's message, another message of the connection, the
    /// same message shifted by one octet or one word: nearly every octet shows.
    #[test]
    fn wrong_connection_message_or_place_shows() {
        let k = Key::new(5, space::WRITE | 100);
        let len = 4096;
        let others = [
            Key::new(6, space::WRITE | 100),
            Key::new(5, space::WRITE | 101),
            Key::new(5, space::SEND | 100),
            Key::new(5 | 1 << 32, space::WRITE | 100),
        ];
        for o in others {
            assert!(k.check(&o.fill(len)).count > len as u64 * 9 / 10, "{o:?}");
        }
        let d = k.fill(len + 8);
        for shift in [1, 8] {
            assert!(k.check(&d[shift..shift + len]).count > len as u64 * 9 / 10);
        }
        // Zeroes (a sink never written) are not the pattern.
        assert!(k.check(&[0; 1024]).count > 1000);
    }

    #[test]
    fn between_counts_differences_and_missing_octets() {
        let a = Key::new(1, 1).fill(100);
        let mut b = a.clone();
        assert_eq!(Wrong::between(&a, &b).count, 0);
        b[50] ^= 0x80;
        let w = Wrong::between(&a, &b);
        assert_eq!((w.count, w.first, w.last), (1, 50, 50));
        let w = Wrong::between(&a[..90], &b);
        assert_eq!((w.count, w.first, w.last), (11, 50, 99));
    }
}
