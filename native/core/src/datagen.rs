//! Deterministic test data: random bytes and the RapidCDC paper's synthetic versioned datasets.
//!
//! The paper (section 4.1) builds each synthetic dataset as a sequence of file versions: a random
//! base file, then each version made from the previous one by K modifications — insert, delete or
//! overwrite of 100 bytes — randomly distributed over the whole file or over a selected leading
//! region of it. [`write_versions`] writes such a dataset: `v0.bin` is the base, `v1.bin`,
//! `v2.bin`, ... the versions (numbers zero-padded to the width of the last one, so that the file
//! names sort in version order).
//!
//! Everything is a pure function of the seed and the parameters. Versions are produced by
//! streaming the previous file through [`apply_mods`] (memory O(K), not O(file size)), so sizes are
//! bounded only by the disk.
//!
//! Modifications never overlap: positions are drawn uniformly in the region of the previous
//! version, sorted, and applied left to right; a position that falls inside the bytes consumed by
//! the previous modification is moved to just after them (so a chunk receives at most one
//! modification unless the modifications are denser than one per `mod_size` bytes).

use crate::error::Error;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// xoshiro256** seeded by SplitMix64: small, fast, and the same on every platform. Not for
/// cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// A generator for one sub-stream of `seed` (e.g. one version of a dataset).
    pub fn derive(seed: u64, stream: u64) -> Rng {
        Rng::new(seed ^ stream.wrapping_add(1).wrapping_mul(0xD6E8_FEB8_6659_FD93))
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `[0, n)`; `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias (< n / 2^64) is irrelevant for test data.
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let v = self.next_u64().to_le_bytes();
            let n = rest.len();
            rest.copy_from_slice(&v[..n]);
        }
    }
}

/// `len` random bytes from `seed` (the same bytes [`write_random`] writes).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(seed).fill(&mut v);
    v
}

const BLOCK: usize = 1 << 20;

/// Writes `size` random bytes from `seed` to `w`, a block at a time.
pub fn write_random<W: Write>(w: &mut W, size: u64, seed: u64) -> Result<(), Error> {
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; BLOCK];
    let mut left = size;
    while left > 0 {
        let n = left.min(BLOCK as u64) as usize;
        // Fill whole blocks so that the byte stream does not depend on the block size used here:
        // `fill` consumes 8 bytes per u64, and BLOCK is a multiple of 8.
        rng.fill(&mut buf[..n]);
        w.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Which modifications a version receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModKind {
    /// Insert, delete or overwrite, each with probability 1/3.
    Mixed,
    /// Insert or delete (the paper's boundary-shifting datasets), each with probability 1/2.
    InsertDelete,
    /// Overwrite only (boundaries do not move).
    Overwrite,
    Insert,
    Delete,
}

impl ModKind {
    pub fn name(self) -> &'static str {
        match self {
            ModKind::Mixed => "mixed",
            ModKind::InsertDelete => "insert-delete",
            ModKind::Overwrite => "overwrite",
            ModKind::Insert => "insert",
            ModKind::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Result<ModKind, Error> {
        Ok(match s {
            "mixed" => ModKind::Mixed,
            "insert-delete" | "shift" => ModKind::InsertDelete,
            "overwrite" => ModKind::Overwrite,
            "insert" => ModKind::Insert,
            "delete" => ModKind::Delete,
            _ => return Err(Error::config(format!(
                "unknown modification kind {s:?} (mixed, insert-delete, overwrite, insert, delete)"
            ))),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Insert,
    Delete,
    Overwrite,
}

impl ModKind {
    fn pick(self, rng: &mut Rng) -> Op {
        match self {
            ModKind::Mixed => [Op::Insert, Op::Delete, Op::Overwrite][rng.below(3) as usize],
            ModKind::InsertDelete => [Op::Insert, Op::Delete][rng.below(2) as usize],
            ModKind::Overwrite => Op::Overwrite,
            ModKind::Insert => Op::Insert,
            ModKind::Delete => Op::Delete,
        }
    }
}

/// Parameters of a synthetic versioned dataset.
#[derive(Clone, Debug)]
pub struct VersionSpec {
    /// Size of the base file `v0`.
    pub base_size: u64,
    /// Number of versions after the base.
    pub versions: usize,
    /// Modifications per version.
    pub mods: usize,
    /// Bytes per modification (the paper: 100).
    pub mod_size: usize,
    /// Modifications fall in the first `region_percent` % of the previous version, in (0, 100].
    pub region_percent: f64,
    pub kind: ModKind,
    pub seed: u64,
}

impl VersionSpec {
    pub fn new(base_size: u64, versions: usize, mods: usize) -> VersionSpec {
        VersionSpec {
            base_size,
            versions,
            mods,
            mod_size: 100,
            region_percent: 100.0,
            kind: ModKind::Mixed,
            seed: 1,
        }
    }

    fn check(&self) -> Result<(), Error> {
        check_mods(self.mods, self.mod_size, self.region_percent)
    }
}

fn check_mods(mods: usize, mod_size: usize, region_percent: f64) -> Result<(), Error> {
    if !(region_percent > 0.0 && region_percent <= 100.0) {
        return Err(Error::config(format!(
            "modification region must be in (0, 100] percent, got {region_percent}"
        )));
    }
    if mods > 0 && mod_size == 0 {
        return Err(Error::config("modification size must be at least 1 byte"));
    }
    Ok(())
}

/// The file name of version `i` in a dataset with `versions` versions after the base.
pub fn version_name(i: usize, versions: usize) -> String {
    let width = versions.to_string().len();
    format!("v{i:0width$}.bin")
}

/// Writes a dataset of `versions + 1` files into `dir` (created if missing): a random base of
/// `base_size` bytes and `versions` versions, each the previous with `mods` modifications (insert,
/// delete or overwrite at random) of `mod_size` bytes within its first `region_percent` %.
/// Returns the paths in version order.
pub fn write_versions(
    dir: &Path,
    base_size: u64,
    versions: usize,
    mods: usize,
    mod_size: usize,
    region_percent: f64,
    seed: u64,
) -> Result<Vec<PathBuf>, Error> {
    write_versions_spec(
        dir,
        &VersionSpec {
            base_size,
            versions,
            mods,
            mod_size,
            region_percent,
            kind: ModKind::Mixed,
            seed,
        },
    )
}

/// [`write_versions`] with every parameter, including the kind of modification.
pub fn write_versions_spec(dir: &Path, spec: &VersionSpec) -> Result<Vec<PathBuf>, Error> {
    spec.check()?;
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::with_capacity(spec.versions + 1);
    let base = dir.join(version_name(0, spec.versions));
    {
        let mut w = BufWriter::with_capacity(BLOCK, File::create(&base)?);
        write_random(&mut w, spec.base_size, spec.seed)?;
        w.flush()?;
    }
    paths.push(base);
    for v in 1..=spec.versions {
        let prev = &paths[v - 1];
        let len = std::fs::metadata(prev)?.len();
        let next = dir.join(version_name(v, spec.versions));
        let r = BufReader::with_capacity(BLOCK, File::open(prev)?);
        let mut w = BufWriter::with_capacity(BLOCK, File::create(&next)?);
        apply_mods(
            r,
            len,
            &mut w,
            spec.mods,
            spec.mod_size,
            spec.region_percent,
            spec.kind,
            Rng::derive(spec.seed, v as u64),
        )?;
        w.flush()?;
        paths.push(next);
    }
    Ok(paths)
}

/// Streams `src` (exactly `src_len` bytes) to `dst` with `mods` non-overlapping modifications of
/// `mod_size` bytes at random positions in the first `region_percent` % of the input. Returns the
/// number of bytes written. Fails if `src` is shorter than `src_len`.
#[allow(clippy::too_many_arguments)]
pub fn apply_mods<R: Read, W: Write>(
    mut src: R,
    src_len: u64,
    dst: &mut W,
    mods: usize,
    mod_size: usize,
    region_percent: f64,
    kind: ModKind,
    mut rng: Rng,
) -> Result<u64, Error> {
    check_mods(mods, mod_size, region_percent)?;
    let region = ((src_len as f64) * region_percent / 100.0).round() as u64;
    let region = region.min(src_len);
    let mut plan: Vec<(u64, Op)> = (0..mods)
        .map(|_| (rng.below(region + 1), kind.pick(&mut rng)))
        .collect();
    plan.sort_by_key(|p| p.0);

    let mut pos = 0u64; // position in src
    let mut out = 0u64;
    let mut buf = vec![0u8; BLOCK.max(mod_size)];
    let copy =
        |src: &mut R, dst: &mut W, n: u64, buf: &mut [u8], discard: bool| -> Result<(), Error> {
            let mut left = n;
            while left > 0 {
                let k = left.min(buf.len() as u64) as usize;
                src.read_exact(&mut buf[..k]).map_err(short_input)?;
                if !discard {
                    dst.write_all(&buf[..k])?;
                }
                left -= k as u64;
            }
            Ok(())
        };
    let mut fresh = vec![0u8; mod_size];
    for (at, op) in plan {
        let at = at.max(pos);
        copy(&mut src, dst, at - pos, &mut buf, false)?;
        out += at - pos;
        pos = at;
        let avail = (src_len - pos).min(mod_size as u64);
        match op {
            Op::Insert => {
                rng.fill(&mut fresh);
                dst.write_all(&fresh)?;
                out += mod_size as u64;
            }
            Op::Delete => {
                copy(&mut src, dst, avail, &mut buf, true)?;
                pos += avail;
            }
            Op::Overwrite => {
                copy(&mut src, dst, avail, &mut buf, true)?;
                pos += avail;
                rng.fill(&mut fresh[..avail as usize]);
                dst.write_all(&fresh[..avail as usize])?;
                out += avail;
            }
        }
    }
    copy(&mut src, dst, src_len - pos, &mut buf, false)?;
    out += src_len - pos;
    Ok(out)
}

fn short_input(e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        Error::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "input shorter than its stated length",
        ))
    } else {
        Error::Io(e)
    }
}

/// In-memory [`apply_mods`] (for tests and small benches).
pub fn modify(
    data: &[u8],
    mods: usize,
    mod_size: usize,
    region_percent: f64,
    kind: ModKind,
    seed: u64,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(data.len() + mods * mod_size);
    apply_mods(
        data,
        data.len() as u64,
        &mut out,
        mods,
        mod_size,
        region_percent,
        kind,
        Rng::new(seed),
    )?;
    Ok(out)
}

/// In-memory dataset: the base and `versions` successive versions (same bytes as
/// [`write_versions_spec`] writes).
pub fn versions_in_memory(spec: &VersionSpec) -> Result<Vec<Vec<u8>>, Error> {
    spec.check()?;
    let base_len = usize::try_from(spec.base_size)
        .map_err(|_| Error::config("base size too large for memory"))?;
    let mut out = vec![random_bytes(base_len, spec.seed)];
    for v in 1..=spec.versions {
        let prev = &out[v - 1];
        let mut next = Vec::with_capacity(prev.len() + spec.mods * spec.mod_size);
        apply_mods(
            prev.as_slice(),
            prev.len() as u64,
            &mut next,
            spec.mods,
            spec.mod_size,
            spec.region_percent,
            spec.kind,
            Rng::derive(spec.seed, v as u64),
        )?;
        out.push(next);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_deterministic_and_block_independent() {
        let a = random_bytes(3 * BLOCK + 5, 7);
        let mut b = Vec::new();
        write_random(&mut b, (3 * BLOCK + 5) as u64, 7).unwrap();
        assert_eq!(a, b);
        assert_ne!(a[..64], random_bytes(64, 8)[..]);
        // A prefix is the same whatever the total length.
        assert_eq!(random_bytes(13, 7)[..], a[..13]);
    }

    #[test]
    fn lengths_follow_the_kind() {
        let base = random_bytes(100_000, 1);
        for (kind, delta) in [
            (ModKind::Insert, 1000i64),
            (ModKind::Delete, -1000),
            (ModKind::Overwrite, 0),
        ] {
            let v = modify(&base, 10, 100, 100.0, kind, 3).unwrap();
            assert_eq!(v.len() as i64, base.len() as i64 + delta, "{kind:?}");
            assert_ne!(v, base);
        }
    }

    #[test]
    fn region_is_respected() {
        let base = random_bytes(200_000, 2);
        for kind in [ModKind::Overwrite, ModKind::Mixed] {
            let v = modify(&base, 50, 100, 10.0, kind, 4).unwrap();
            // Well beyond 10 %, the tail is unchanged (shifted by the net size delta).
            let tail = base.len() - 30_000;
            assert_eq!(v[v.len() - tail..], base[base.len() - tail..], "{kind:?}");
        }
    }

    #[test]
    fn short_input_is_an_error() {
        let base = random_bytes(1000, 2);
        let mut out = Vec::new();
        let r = apply_mods(
            &base[..],
            2000,
            &mut out,
            1,
            10,
            100.0,
            ModKind::Insert,
            Rng::new(1),
        );
        assert!(matches!(r, Err(Error::Io(_))));
        assert!(modify(&base, 1, 10, 0.0, ModKind::Insert, 1).is_err());
        assert!(modify(&base, 1, 0, 50.0, ModKind::Insert, 1).is_err());
    }

    #[test]
    fn files_equal_memory() {
        let dir = std::env::temp_dir().join(format!("cutpoint-datagen-{}", std::process::id()));
        let mut spec = VersionSpec::new(300_000, 3, 20);
        spec.seed = 9;
        let paths = write_versions_spec(&dir, &spec).unwrap();
        let mem = versions_in_memory(&spec).unwrap();
        assert_eq!(paths.len(), 4);
        for (p, m) in paths.iter().zip(&mem) {
            assert_eq!(&std::fs::read(p).unwrap(), m, "{}", p.display());
        }
        assert_eq!(version_name(3, 12), "v03.bin");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
