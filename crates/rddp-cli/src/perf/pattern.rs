//! The patterned payload of --verify: every octet depends on its offset and a seed
//! (the message size), so a misplaced, truncated or corrupted octet shows.

/// The octet at `offset` of the pattern for `seed`.
pub fn byte(seed: u32, offset: usize) -> u8 {
    let x = (offset as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(seed.wrapping_mul(40_503))
        .wrapping_add(offset as u32 >> 8);
    (x >> 24) as u8
}

/// `len` octets of the pattern for `seed`.
pub fn fill(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| byte(seed, i)).collect()
}

/// How many octets of `data` differ from the pattern for `seed`.
pub fn corrupt(seed: u32, data: &[u8]) -> u64 {
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
}
