//! Profiles: everything that decides chunk boundaries, with one canonical text form.
//!
//! Text form: `FAMILY:MIN:AVG:MAX[:key=value,...]`, sizes in bytes with an optional
//! `k` / `m` / `g` suffix (powers of 1024). Examples: `crc32:2k:16k:64k`,
//! `rabin:4k:8k:12k`, `gear:2k:8k:64k:nc=2`.
//!
//! Boundary rule (all families): a chunk `[s, e)` ends at the first `e` with
//! `e - s >= MIN` where the rolling hash of the window `[e - W, e)` matches, or at
//! `e - s == MAX`, or at the end of the input. For `gear` with `nc > 0`, "matches" means
//! the strict class while `e - s < AVG` and the loose class from `AVG` on.

use crate::error::Error;
use std::fmt;
use std::str::FromStr;

/// Rolling-hash family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Reflected CRC-32 (poly 0xEDB88320) rolled over a `window`-byte window (SS-CDC paper).
    Crc32,
    /// Rabin fingerprint, degree-53 polynomial, over a `window`-byte window (RapidCDC paper).
    Rabin,
    /// 64-bit Gear hash (FastCDC); its value depends only on the last 64 bytes.
    Gear,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Crc32 => "crc32",
            Family::Rabin => "rabin",
            Family::Gear => "gear",
        }
    }
    pub fn default_window(self) -> usize {
        match self {
            Family::Crc32 => 256,
            Family::Rabin => 48,
            Family::Gear => 64,
        }
    }
    fn default_nc(self) -> u32 {
        match self {
            Family::Gear => 2,
            _ => 0,
        }
    }
}

impl FromStr for Family {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "crc32" | "crc" => Ok(Family::Crc32),
            "rabin" => Ok(Family::Rabin),
            "gear" => Ok(Family::Gear),
            other => Err(Error::profile(format!(
                "unknown hash family '{other}' (expected crc32, rabin or gear)"
            ))),
        }
    }
}

/// Default gear table seed (the table is derived from it with splitmix64; see `rolling::gear`).
pub const DEFAULT_GEAR_SEED: u64 = 0x6375_7470_6f69_6e74; // "cutpoint"

/// Largest MAX accepted: chunk sizes cross the wasm/JS boundary as u32, and hint tables store them.
pub const MAX_CHUNK_LIMIT: usize = 1 << 30;

/// A validated chunking profile.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Profile {
    pub family: Family,
    pub min: usize,
    pub avg: usize,
    pub max: usize,
    /// Rolling window in bytes (fixed at 64 for gear).
    pub window: usize,
    /// crc32 / rabin: a position matches when `hash & (avg - 1) == magic`.
    pub magic: u64,
    /// gear: normalization level (0..=3). 0 means one mask.
    pub nc: u32,
    /// gear: table seed.
    pub seed: u64,
}

impl Profile {
    /// The default profile. Chosen by measurement (see README, "Choosing the default").
    pub fn default_profile() -> Profile {
        "gear:2k:8k:64k".parse().expect("default profile is valid")
    }

    /// Builds and validates a profile with default keys.
    pub fn new(family: Family, min: usize, avg: usize, max: usize) -> Result<Profile, Error> {
        let p = Profile {
            family,
            min,
            avg,
            max,
            window: family.default_window(),
            magic: 0,
            nc: family.default_nc(),
            seed: DEFAULT_GEAR_SEED,
        };
        p.validate()?;
        Ok(p)
    }

    /// log2(avg).
    pub fn avg_bits(&self) -> u32 {
        self.avg.trailing_zeros()
    }

    /// Whether stage 1 records two candidate classes (gear with normalization).
    pub fn two_classes(&self) -> bool {
        self.family == Family::Gear && self.nc > 0
    }

    pub fn validate(&self) -> Result<(), Error> {
        let e = |m: String| Err(Error::profile(m));
        if self.window == 0 {
            return e("window must be at least 1 byte".into());
        }
        if self.family == Family::Gear && self.window != 64 {
            return e(format!("gear has a fixed 64-byte window (got window={})", self.window));
        }
        if self.family == Family::Crc32 && self.window > 1 << 20 {
            return e(format!("window {} is too large (at most 1m)", self.window));
        }
        if self.family == Family::Rabin && self.window > 1 << 20 {
            return e(format!("window {} is too large (at most 1m)", self.window));
        }
        if self.min == 0 {
            return e("MIN must be at least 1".into());
        }
        if self.min < self.window {
            return e(format!(
                "MIN ({}) must be at least the window ({}): the hash at a cut must see only bytes of its own chunk",
                fmt_size(self.min),
                self.window
            ));
        }
        if self.min > self.avg {
            return e(format!("MIN ({}) is larger than AVG ({})", fmt_size(self.min), fmt_size(self.avg)));
        }
        if self.avg > self.max {
            return e(format!("AVG ({}) is larger than MAX ({})", fmt_size(self.avg), fmt_size(self.max)));
        }
        if self.max > MAX_CHUNK_LIMIT {
            return e(format!("MAX ({}) is larger than the limit 1g", fmt_size(self.max)));
        }
        if !self.avg.is_power_of_two() {
            return e(format!(
                "AVG ({}) must be a power of two: the boundary test masks log2(AVG) bits",
                self.avg
            ));
        }
        if self.avg < 2 {
            return e("AVG must be at least 2".into());
        }
        match self.family {
            Family::Gear => {
                if self.nc > 3 {
                    return e(format!("nc={} is out of range (0..=3)", self.nc));
                }
                let bits = self.avg_bits();
                if bits <= self.nc || bits + self.nc > 63 {
                    return e(format!(
                        "nc={} does not fit AVG={} (need nc < log2(AVG) and log2(AVG)+nc <= 63)",
                        self.nc, self.avg
                    ));
                }
                if self.magic != 0 {
                    return e("magic= applies to crc32 and rabin only".into());
                }
            }
            Family::Crc32 | Family::Rabin => {
                if self.nc != 0 {
                    return e(format!("nc= applies to gear only (got nc={} for {})", self.nc, self.family.name()));
                }
                if self.magic >= self.avg as u64 {
                    return e(format!("magic={} must be below AVG ({})", self.magic, self.avg));
                }
                if self.family == Family::Rabin && self.avg_bits() > 53 {
                    return e("rabin AVG must be at most 2^53".into());
                }
                if self.seed != DEFAULT_GEAR_SEED {
                    return e("seed= applies to gear only".into());
                }
            }
        }
        Ok(())
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile::default_profile()
    }
}

/// Parses `123`, `2k`, `16K`, `1m`, `1g` (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, Error> {
    let t = s.trim();
    if t.is_empty() {
        return Err(Error::profile("empty size".to_string()));
    }
    let (num, mul) = match t.as_bytes()[t.len() - 1].to_ascii_lowercase() {
        b'k' => (&t[..t.len() - 1], 1usize << 10),
        b'm' => (&t[..t.len() - 1], 1usize << 20),
        b'g' => (&t[..t.len() - 1], 1usize << 30),
        _ => (t, 1usize),
    };
    let n: usize = num
        .parse()
        .map_err(|_| Error::profile(format!("'{s}' is not a size (examples: 4096, 4k, 1m)")))?;
    n.checked_mul(mul).ok_or_else(|| Error::profile(format!("size '{s}' is too large")))
}

/// Prints a size with the largest exact suffix (`16384` → `16k`).
pub fn fmt_size(n: usize) -> String {
    if n != 0 && n.is_multiple_of(1 << 30) {
        format!("{}g", n >> 30)
    } else if n != 0 && n.is_multiple_of(1 << 20) {
        format!("{}m", n >> 20)
    } else if n != 0 && n.is_multiple_of(1 << 10) {
        format!("{}k", n >> 10)
    } else {
        n.to_string()
    }
}

impl FromStr for Profile {
    type Err = Error;
    fn from_str(s: &str) -> Result<Profile, Error> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        if parts.len() < 4 || parts.len() > 5 {
            return Err(Error::profile(format!(
                "'{s}' is not a profile: expected FAMILY:MIN:AVG:MAX[:key=value,...], e.g. crc32:2k:16k:64k"
            )));
        }
        let family: Family = parts[0].parse()?;
        let mut p = Profile {
            family,
            min: parse_size(parts[1])?,
            avg: parse_size(parts[2])?,
            max: parse_size(parts[3])?,
            window: family.default_window(),
            magic: 0,
            nc: family.default_nc(),
            seed: DEFAULT_GEAR_SEED,
        };
        if parts.len() == 5 && !parts[4].is_empty() {
            // Each key once: a repeated one (`nc=2,nc=3`) is an error, never last-wins.
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for kv in parts[4].split(',') {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| Error::profile(format!("'{kv}' is not key=value")))?;
                let canon = match k.trim() {
                    "w" => "window",
                    other => other,
                };
                if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canon) {
                    return Err(Error::profile(format!(
                        "key '{canon}' is given twice ('{first}' and '{kv}'): give each key once"
                    )));
                }
                seen.push((canon, kv));
                let num = |v: &str| -> Result<u64, Error> {
                    let v = v.trim();
                    let r = if let Some(h) = v.strip_prefix("0x") {
                        u64::from_str_radix(h, 16)
                    } else {
                        v.parse()
                    };
                    r.map_err(|_| Error::profile(format!("{k}={v}: not a number")))
                };
                match k.trim() {
                    "window" | "w" => p.window = parse_size(v)?,
                    "magic" => p.magic = num(v)?,
                    "nc" => p.nc = u32::try_from(num(v)?).map_err(|_| Error::profile(format!("nc={v} is out of range")))?,
                    "seed" => p.seed = num(v)?,
                    other => {
                        return Err(Error::profile(format!(
                            "unknown profile key '{other}' (known: window, magic, nc, seed)"
                        )))
                    }
                }
            }
        }
        p.validate()?;
        Ok(p)
    }
}

impl fmt::Display for Profile {
    /// The canonical form: sizes with the largest exact suffix, then the keys that differ from
    /// the family's defaults, in a fixed order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.family.name(),
            fmt_size(self.min),
            fmt_size(self.avg),
            fmt_size(self.max)
        )?;
        let mut keys = Vec::new();
        if self.window != self.family.default_window() {
            keys.push(format!("window={}", self.window));
        }
        if self.magic != 0 {
            keys.push(format!("magic={}", self.magic));
        }
        if self.nc != self.family.default_nc() {
            keys.push(format!("nc={}", self.nc));
        }
        if self.seed != DEFAULT_GEAR_SEED {
            keys.push(format!("seed=0x{:x}", self.seed));
        }
        if !keys.is_empty() {
            write!(f, ":{}", keys.join(","))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonically() {
        let cases = [
            ("crc32:2k:16k:64k", "crc32:2k:16k:64k"),
            ("CRC32:2048:16384:65536", "crc32:2k:16k:64k"),
            ("rabin:4k:8k:12k", "rabin:4k:8k:12k"),
            ("gear:2k:8k:64k:nc=2", "gear:2k:8k:64k"),
            ("gear:2k:8k:64k:nc=0", "gear:2k:8k:64k:nc=0"),
            ("crc32:1k:4k:1m:window=64,magic=7", "crc32:1k:4k:1m:window=64,magic=7"),
            ("gear:2k:8k:64k:seed=0x1f", "gear:2k:8k:64k:seed=0x1f"),
        ];
        for (input, canon) in cases {
            let p: Profile = input.parse().unwrap();
            assert_eq!(p.to_string(), canon, "{input}");
            let again: Profile = canon.parse().unwrap();
            assert_eq!(again, p);
        }
    }

    #[test]
    fn rejects_bad_profiles_with_reasons() {
        let cases = [
            ("md5:2k:8k:64k", "unknown hash family"),
            ("crc32:2k:8k", "expected FAMILY:MIN:AVG:MAX"),
            ("crc32:16k:8k:64k", "MIN (16k) is larger than AVG"),
            ("crc32:2k:128k:64k", "AVG (128k) is larger than MAX"),
            ("crc32:100:8k:64k", "MIN (100) must be at least the window (256)"),
            ("crc32:2k:10000:64k", "must be a power of two"),
            ("gear:2k:8k:64k:nc=4", "out of range"),
            ("crc32:2k:8k:64k:nc=1", "applies to gear only"),
            ("crc32:2k:8k:64k:magic=8192", "must be below AVG"),
            ("crc32:2k:8k:64k:colour=red", "unknown profile key"),
            ("crc32:2x:8k:64k", "not a size"),
            ("gear:2k:8k:64k:window=32", "fixed 64-byte window"),
            ("crc32:0:8k:64k", "MIN must be at least 1"),
            ("crc32:2k:8k:2g", "larger than the limit"),
            // A repeated key is an error, never last-wins (issue #19); `w` is `window`.
            ("gear:2k:8k:64k:nc=2,nc=3", "key 'nc' is given twice ('nc=2' and 'nc=3')"),
            ("gear:2k:8k:64k:nc=2,nc=2", "key 'nc' is given twice"),
            ("crc32:2k:8k:64k:window=64,w=32", "key 'window' is given twice ('window=64' and 'w=32')"),
            ("gear:2k:8k:64k:seed=1,nc=1,seed=2", "key 'seed' is given twice"),
        ];
        for (input, want) in cases {
            let err = input.parse::<Profile>().unwrap_err().to_string();
            assert!(err.contains(want), "{input}: got '{err}', want '{want}'");
        }
    }
}
