//! A cursor over fuzz input: every read succeeds (zeros once the input is used
//! up), so any byte string is a valid program for a target. [`Seed`] writes the
//! same format, for seed corpora built from real traffic.

/// Reads little-endian integers and byte strings from the fuzz input.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Everything not read yet; the input is used up after.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    /// The next octet (0 once the input is used up).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next octet's low bit.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// The next two octets, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next four octets, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }

    /// The next eight octets, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// Up to `n` octets (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    /// A length-prefixed (u16) byte string of at most `max` octets.
    pub fn blob(&mut self, max: usize) -> &'a [u8] {
        let n = usize::from(self.u16()) % (max + 1);
        self.bytes(n)
    }

    /// A value in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.u8()) % n.max(1)
    }
}

/// Writes the format [`Input`] reads.
#[derive(Debug, Clone, Default)]
pub struct Seed(pub Vec<u8>);

impl Seed {
    /// What [`Input::u8`] reads back as `v`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// What [`Input::bool`] reads back as `v`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// What [`Input::u16`] reads back as `v`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// What [`Input::u32`] reads back as `v`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// What [`Input::u64`] reads back as `v`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// What [`Input::bytes`] reads back as `b`.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A blob as [`Input::blob`] reads it (`b` must be shorter than 65536 octets
    /// and at most the reader's `max`).
    pub fn blob(&mut self, b: &[u8]) -> &mut Self {
        self.u16(b.len() as u16);
        self.bytes(b)
    }
}
