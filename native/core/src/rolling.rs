//! Rolling-hash families and their tables.
//!
//! Every family is rolled the same way: `h = roll(h, leaving, entering)`, where `leaving` is the
//! byte that drops out of the `W`-byte window and `entering` the new one. Starting from `h = 0`
//! and rolling in `W` bytes with `leaving = 0` gives the exact hash of those `W` bytes, because
//! every family's table maps byte 0 to 0 on the remove side. The hash at cut position `e` is
//! therefore a pure function of the bytes `[e - W, e)`: never reset at a chunk start.
//!
//! * `crc32` — reflected CRC-32, polynomial 0xEDB88320, initial state 0, no final XOR.
//!   `crct` is the standard table; `h = (h >> 8) ^ crct[(h ^ c) & 0xff]` adds a byte.
//!   `crcu[b]` is the state reached from 0 by feeding `b` then `W - 1` zero bytes; by linearity
//!   `h ^= crcu[leaving]` (just before adding the entering byte) removes the leaving byte.
//! * `rabin` — Rabin fingerprint: the window as a polynomial over GF(2) (first byte most
//!   significant), reduced modulo the irreducible degree-53 polynomial `RABIN_POLY`
//!   (0x3DA3358B4DC173, the one LBFS used). Appending a byte is
//!   `h = ((h << 8) | c) ^ rabin_t[h >> 45]` where `rabin_t[j] = (j << 53) ^ (j·x^53 mod P)`;
//!   removing is `h ^= rabin_u[b]`, `rabin_u[b] = b·x^(8(W-1)) mod P`.
//! * `gear` — `h = (h << 1) + G[c]` on 64 bits (FastCDC). A byte's contribution is shifted out
//!   after 64 steps, so the value depends only on the last 64 bytes. `G` is derived from the
//!   profile's seed with splitmix64: `state += 0x9E3779B97F4A7C15; G[i] = mix(state)` for
//!   `i = 0..256` (see [`gear_table`]).
//!
//! Matching: a position is a candidate of class *strict* when `h & mask_strict == magic` and of
//! class *loose* when `h & mask_loose == magic`. For crc32 and rabin both masks are
//! `AVG - 1` (low bits). For gear the masks take the top bits of `h` (which depend on the whole
//! 64-byte window): `log2(AVG) + nc` bits for strict, `log2(AVG) - nc` for loose, so
//! strict candidates are a subset of loose ones.

use crate::profile::{Family, Profile};

/// The Rabin polynomial (degree 53).
pub const RABIN_POLY: u64 = 0x003D_A335_8B4D_C173;
const RABIN_DEGREE: u32 = 53;
const RABIN_SHIFT: u32 = RABIN_DEGREE - 8; // 45

/// Tables and masks for one profile. Built once per engine.
#[derive(Clone)]
pub struct Tables {
    pub family: Family,
    pub window: usize,
    pub crct: [u32; 256],
    pub crcu: [u32; 256],
    pub rabin_t: [u64; 256],
    pub rabin_u: [u64; 256],
    pub gear: [u64; 256],
    pub mask_strict: u64,
    pub mask_loose: u64,
    pub magic: u64,
}

impl Tables {
    pub fn new(p: &Profile) -> Box<Tables> {
        let mut t = Box::new(Tables {
            family: p.family,
            window: p.window,
            crct: [0; 256],
            crcu: [0; 256],
            rabin_t: [0; 256],
            rabin_u: [0; 256],
            gear: [0; 256],
            mask_strict: 0,
            mask_loose: 0,
            magic: p.magic,
        });
        let bits = p.avg_bits();
        match p.family {
            Family::Crc32 => {
                t.crct = crc_table();
                for b in 0..256usize {
                    let mut h = crc_add(&t.crct, 0, b as u8);
                    for _ in 1..p.window {
                        h = crc_add(&t.crct, h, 0);
                    }
                    t.crcu[b] = h;
                }
                t.mask_strict = (p.avg - 1) as u64;
                t.mask_loose = t.mask_strict;
            }
            Family::Rabin => {
                for j in 0..256u64 {
                    t.rabin_t[j as usize] = (j << RABIN_DEGREE) ^ poly_mod(j << RABIN_DEGREE);
                }
                for b in 0..256usize {
                    let mut h = b as u64;
                    for _ in 1..p.window {
                        h = rabin_add(&t.rabin_t, h, 0);
                    }
                    t.rabin_u[b] = h;
                }
                t.mask_strict = (p.avg - 1) as u64;
                t.mask_loose = t.mask_strict;
            }
            Family::Gear => {
                t.gear = gear_table(p.seed);
                let s = bits + p.nc;
                let l = bits - p.nc;
                t.mask_strict = !0u64 << (64 - s);
                t.mask_loose = !0u64 << (64 - l);
            }
        }
        t
    }

    /// One rolling step, for any family (the readable form; kernels specialise it).
    #[inline(always)]
    pub fn roll(&self, h: u64, leaving: u8, entering: u8) -> u64 {
        match self.family {
            Family::Crc32 => {
                let h = (h as u32) ^ self.crcu[leaving as usize];
                crc_add(&self.crct, h, entering) as u64
            }
            Family::Rabin => rabin_add(&self.rabin_t, h ^ self.rabin_u[leaving as usize], entering),
            Family::Gear => (h << 1).wrapping_add(self.gear[entering as usize]),
        }
    }

    /// Hash of `window` computed by rolling it in from zero (`window.len()` must be `W`).
    pub fn hash_window(&self, window: &[u8]) -> u64 {
        window.iter().fold(0u64, |h, &c| self.roll(h, 0, c))
    }

    #[inline(always)]
    pub fn is_strict(&self, h: u64) -> bool {
        h & self.mask_strict == self.magic
    }
    #[inline(always)]
    pub fn is_loose(&self, h: u64) -> bool {
        h & self.mask_loose == self.magic
    }
}

/// The standard reflected CRC-32 table (poly 0xEDB88320).
pub fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
        *e = c;
    }
    t
}

#[inline(always)]
pub fn crc_add(t: &[u32; 256], h: u32, c: u8) -> u32 {
    (h >> 8) ^ t[((h ^ c as u32) & 0xff) as usize]
}

#[inline(always)]
pub fn rabin_add(t: &[u64; 256], h: u64, c: u8) -> u64 {
    ((h << 8) | c as u64) ^ t[(h >> RABIN_SHIFT) as usize]
}

/// `x mod RABIN_POLY` for `x < 2^61`, by long division over GF(2).
fn poly_mod(mut x: u64) -> u64 {
    for bit in (RABIN_DEGREE..64).rev() {
        if x & (1 << bit) != 0 {
            x ^= RABIN_POLY << (bit - RABIN_DEGREE);
        }
    }
    x
}

/// The gear table for `seed` (splitmix64).
pub fn gear_table(seed: u64) -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut state = seed;
    for e in t.iter_mut() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        *e = z ^ (z >> 31);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bitwise CRC-32 (reflected, init 0, no final xor) with no tables at all.
    fn crc_bitwise(bytes: &[u8]) -> u32 {
        let mut c = 0u32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        c
    }

    /// Rabin fingerprint from scratch, bit by bit: the bytes as one polynomial mod P.
    fn rabin_bitwise(bytes: &[u8]) -> u64 {
        let mut r = 0u64;
        for &b in bytes {
            for i in (0..8).rev() {
                r = (r << 1) | ((b >> i) & 1) as u64;
                if r & (1 << RABIN_DEGREE) != 0 {
                    r ^= RABIN_POLY;
                }
            }
        }
        r
    }

    fn gear_scratch(g: &[u64; 256], window: &[u8]) -> u64 {
        let n = window.len();
        window
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, &c)| acc.wrapping_add(g[c as usize].wrapping_shl((n - 1 - i) as u32)))
    }

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 33) as u8
            })
            .collect()
    }

    #[test]
    fn rolled_values_equal_from_scratch_hashes() {
        let data = bytes(5000, 7);
        for prof in ["crc32:2k:16k:64k", "crc32:1k:4k:64k:window=31", "rabin:4k:8k:12k", "rabin:1k:8k:12k:window=257", "gear:2k:8k:64k"] {
            let p: Profile = prof.parse().unwrap();
            let t = Tables::new(&p);
            let w = p.window;
            let mut h = t.hash_window(&data[..w]);
            for e in w..data.len() {
                let win = &data[e - w..e];
                let want = match p.family {
                    Family::Crc32 => crc_bitwise(win) as u64,
                    Family::Rabin => rabin_bitwise(win),
                    Family::Gear => gear_scratch(&t.gear, win),
                };
                assert_eq!(h, want, "{prof} at {e}");
                h = t.roll(h, data[e - w], data[e]);
            }
        }
    }

    #[test]
    fn crc_table_matches_known_crc() {
        // CRC-32/JAMCRC-style core (init 0, no xorout) of "123456789" is !0xCBF43926 after
        // adjusting for init; check the table against the bitwise definition instead.
        let t = crc_table();
        let data = b"123456789";
        let h = data.iter().fold(0u32, |h, &c| crc_add(&t, h, c));
        assert_eq!(h, crc_bitwise(data));
        // Standard CRC-32 (init !0, xorout !0) via the same table gives the catalogue value.
        let std = !data.iter().fold(!0u32, |h, &c| crc_add(&t, h, c));
        assert_eq!(std, 0xCBF4_3926);
    }

    #[test]
    fn gear_masks_nest() {
        let p: Profile = "gear:2k:8k:64k:nc=2".parse().unwrap();
        let t = Tables::new(&p);
        assert_eq!(t.mask_strict.count_ones(), 15);
        assert_eq!(t.mask_loose.count_ones(), 11);
        assert_eq!(t.mask_strict & t.mask_loose, t.mask_loose);
    }
}
