//! The identity of a sub-chunk candidate, shared by the counting table ([`super::fbc`]) and the
//! Bloom filters ([`super::bloom`]); it lives here so that neither of the two imports the other.

/// A sub-chunk candidate's identity: 128 bits of its BLAKE3 digest name it in the counting
/// table; the other 128 bits give the Bloom filter probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) id: u128,
    pub(crate) h1: u64,
    pub(crate) h2: u64,
}

impl Key {
    pub(super) fn rolling(a: u64, b: u64) -> Key {
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Key { id: (a as u128) | ((b as u128) << 64), h1: mix(a ^ b.rotate_left(29)), h2: mix(b ^ a.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15) }
    }
    pub(super) fn blake3(bytes: &[u8]) -> Key {
        let d = blake3::hash(bytes);
        let d = d.as_bytes();
        let w = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap_or([0; 8]));
        Key { id: (w(0) as u128) | ((w(8) as u128) << 64), h1: w(16), h2: w(24) }
    }
}
