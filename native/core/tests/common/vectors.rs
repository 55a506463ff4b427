//! The shared test vectors (`tests/vectors/*.json` at the repository root): input generators,
//! the list of profiles and cases, and the exact JSON text the generator writes.
//!
//! This one file is used by the generator (`examples/gen_vectors.rs`, via `#[path]`) and by the
//! test that checks the checked-in files equal its output (`tests/vectors.rs`), so the two can
//! never drift apart. It depends only on `cutpoint_core` and `serde_json`.
#![allow(dead_code)]

use cutpoint_core::{hex, reference_cuts, HashAlg, Profile};

/// How every input is produced. Repeated verbatim as `_comment` in every file, so that another
/// language (JavaScript/wasm, the browser, the store tests) can regenerate the inputs.
pub const GENERATORS: &str = "Inputs are not stored: regenerate each case's input from its `input` object \
{generator, seed, length[, period | byte]}. All arithmetic is on unsigned 64-bit integers, wrapping \
(in JavaScript use BigInt and mask with 2^64-1). \
`xorshift64star`: state = seed (never 0); for each output byte: state ^= state >> 12; state ^= state << 25; \
state ^= state >> 27; v = state * 0x2545F4914F6CDD1D (mod 2^64); byte = v >> 56 (the top 8 bits of v). \
The first bytes for seed 1 are 0x47 0xab 0xb9 0x4d. \
`lowentropy`: the same sequence of v as xorshift64star, but byte = 0x61 + (v >> 62), i.e. one of 'a' 'b' 'c' 'd' \
(2 bits per byte, long repeats of the same window are rare but hashes see little entropy). \
`repeat`: the first `period` bytes of xorshift64star(seed), repeated (byte i = xorshift64star(seed)[i mod period]) \
up to `length` (duplicate content: equal chunks have equal fingerprints). \
`fill`: every byte equals `byte` (constant data: the rolling hash is constant, so every chunk is MIN or every \
chunk is MAX, depending on whether that constant window matches). \
`profile` is the canonical profile string. `cuts` are the chunk end offsets in order (chunk i is \
[cuts[i-1], cuts[i]) with cuts[-1] = 0; empty for an empty input; the last one equals length). `blake3` and \
`sha256` are the lower-case hex digests (BLAKE3-256, SHA-256) of each chunk's bytes, in order. `note` says why the \
case is there. Every engine (reference, SS-CDC with every backend, any threads, segment size or read sizes, \
the wasm build) must reproduce cuts and fingerprints exactly. Rewrite with \
`cd native && cargo run --release -p cutpoint-core --example gen_vectors -- ../tests/vectors`; \
`cargo test -p cutpoint-core --test vectors` checks the files equal that output.";

/// A named deterministic input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Xorshift { seed: u64, length: usize },
    LowEntropy { seed: u64, length: usize },
    Repeat { seed: u64, period: usize, length: usize },
    Fill { byte: u8, length: usize },
}

/// xorshift64* state, one step per output byte.
pub struct XorShift64Star(u64);

impl XorShift64Star {
    pub fn new(seed: u64) -> Self {
        assert!(seed != 0, "xorshift64* needs a non-zero seed");
        XorShift64Star(seed)
    }
    /// The next 64-bit output `v` (the byte generators take its top bits).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `length` bytes of xorshift64*(seed), byte = top 8 bits.
pub fn xorshift_bytes(seed: u64, length: usize) -> Vec<u8> {
    let mut g = XorShift64Star::new(seed);
    (0..length).map(|_| (g.next_u64() >> 56) as u8).collect()
}

impl Input {
    pub fn len(&self) -> usize {
        match *self {
            Input::Xorshift { length, .. }
            | Input::LowEntropy { length, .. }
            | Input::Repeat { length, .. }
            | Input::Fill { length, .. } => length,
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        match *self {
            Input::Xorshift { seed, length } => xorshift_bytes(seed, length),
            Input::LowEntropy { seed, length } => {
                let mut g = XorShift64Star::new(seed);
                (0..length).map(|_| 0x61 + (g.next_u64() >> 62) as u8).collect()
            }
            Input::Repeat { seed, period, length } => {
                let p = xorshift_bytes(seed, period);
                (0..length).map(|i| p[i % period]).collect()
            }
            Input::Fill { byte, length } => vec![byte; length],
        }
    }

    /// The JSON object that names this input.
    pub fn to_json(&self) -> String {
        match *self {
            Input::Xorshift { seed, length } => {
                format!(r#"{{"generator": "xorshift64star", "seed": {seed}, "length": {length}}}"#)
            }
            Input::LowEntropy { seed, length } => {
                format!(r#"{{"generator": "lowentropy", "seed": {seed}, "length": {length}}}"#)
            }
            Input::Repeat { seed, period, length } => format!(
                r#"{{"generator": "repeat", "seed": {seed}, "period": {period}, "length": {length}}}"#
            ),
            Input::Fill { byte, length } => {
                format!(r#"{{"generator": "fill", "byte": {byte}, "length": {length}}}"#)
            }
        }
    }

    /// Parses the JSON object written by [`Input::to_json`] (what another language would do).
    pub fn from_json(v: &serde_json::Value) -> Result<Input, String> {
        let num = |k: &str| -> Result<u64, String> {
            v.get(k).and_then(|x| x.as_u64()).ok_or_else(|| format!("input: missing number '{k}' in {v}"))
        };
        let g = v.get("generator").and_then(|x| x.as_str()).ok_or("input: missing generator")?;
        let length = num("length")? as usize;
        Ok(match g {
            "xorshift64star" => Input::Xorshift { seed: num("seed")?, length },
            "lowentropy" => Input::LowEntropy { seed: num("seed")?, length },
            "repeat" => Input::Repeat { seed: num("seed")?, period: num("period")? as usize, length },
            "fill" => Input::Fill { byte: u8::try_from(num("byte")?).map_err(|e| e.to_string())?, length },
            other => return Err(format!("unknown generator '{other}'")),
        })
    }
}

/// One case: an input and why it is there.
pub struct Case {
    pub note: String,
    pub input: Input,
}

/// The vector files: (file stem, profile string). The profile string is in canonical form.
pub const PROFILES: &[(&str, &str)] = &[
    ("crc32-2k-16k-64k", "crc32:2k:16k:64k"),
    ("rabin-4k-8k-12k", "rabin:4k:8k:12k"),
    ("gear-2k-8k-64k", "gear:2k:8k:64k"),
    ("gear-2k-8k-64k-nc0", "gear:2k:8k:64k:nc=0"),
    ("gear-2k-8k-64k-nc3", "gear:2k:8k:64k:nc=3"),
    ("crc32-256-1k-4k-window64", "crc32:256:1k:4k:window=64"),
    ("rabin-256-1k-4k-magic7", "rabin:256:1k:4k:magic=7"),
];

/// The cases for one profile: the edge lengths of the boundary rule on random data, then longer
/// random, low-entropy, repetitive and constant inputs.
pub fn cases(p: &Profile) -> Vec<Case> {
    let (w, min, avg, max) = (p.window, p.min, p.avg, p.max);
    let mut v = Vec::new();
    let mut edge = |length: usize, note: &str| {
        v.push(Case { note: format!("length {length} = {note}"), input: Input::Xorshift { seed: 1, length } })
    };
    edge(0, "0: no chunks");
    edge(1, "1: one 1-byte chunk");
    edge(w - 1, "W-1: shorter than one window");
    edge(w, "W: exactly one window");
    edge(w + 1, "W+1: first position with a rolled hash");
    edge(min - 1, "MIN-1: one short chunk");
    edge(min, "MIN: one chunk, no cut possible inside");
    edge(min + 1, "MIN+1: first cut position is MIN");
    edge(avg - 1, "AVG-1: strict class throughout (gear with nc>0)");
    edge(avg, "AVG");
    edge(avg + 1, "AVG+1: loose class from AVG on");
    edge(max - 1, "MAX-1");
    edge(max, "MAX");
    edge(max + 1, "MAX+1: a MAX cut if no candidate");
    edge(2 * max + 1, "2*MAX+1");
    v.push(Case {
        note: "random bytes, many chunks".into(),
        input: Input::Xorshift { seed: 2, length: 24 * avg + 12345 },
    });
    v.push(Case {
        note: "low-entropy bytes ('a'..'d')".into(),
        input: Input::LowEntropy { seed: 3, length: 12 * avg + 777 },
    });
    v.push(Case {
        note: "a random block repeated: duplicate chunks, equal fingerprints".into(),
        input: Input::Repeat { seed: 4, period: 3 * avg + 17, length: 16 * avg + 3 },
    });
    v.push(Case { note: "all zero bytes".into(), input: Input::Fill { byte: 0, length: 3 * max + 5 } });
    v.push(Case { note: "all 0xa5 bytes".into(), input: Input::Fill { byte: 0xa5, length: 3 * max + 5 } });
    v
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn list<T, F: Fn(&T) -> String>(items: &[T], f: F) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

/// The full text of one vector file (deterministic; ends with a newline). Expected values come
/// from the reference chunker and the fingerprint crates.
pub fn render(profile_str: &str) -> String {
    let p: Profile = profile_str.parse().expect("vector profile parses");
    assert_eq!(p.to_string(), profile_str, "vector profiles are written in canonical form");
    let mut out = String::new();
    out.push_str("{\n");
    out.push_str(&format!("  \"_comment\": {},\n", json_str(GENERATORS)));
    out.push_str(&format!("  \"profile\": {},\n", json_str(profile_str)));
    out.push_str(&format!(
        "  \"window\": {}, \"min\": {}, \"avg\": {}, \"max\": {},\n",
        p.window, p.min, p.avg, p.max
    ));
    out.push_str("  \"cases\": [\n");
    let cases = cases(&p);
    for (i, c) in cases.iter().enumerate() {
        let data = c.input.bytes();
        let cuts = reference_cuts(&p, &data);
        let mut starts = vec![0];
        starts.extend_from_slice(&cuts);
        let digest = |alg: HashAlg| -> Vec<String> {
            cuts.iter().zip(&starts).map(|(&e, &s)| hex(&alg.digest(&data[s..e]).unwrap())).collect()
        };
        out.push_str("    {\n");
        out.push_str(&format!("      \"note\": {},\n", json_str(&c.note)));
        out.push_str(&format!("      \"input\": {},\n", c.input.to_json()));
        out.push_str(&format!("      \"cuts\": [{}],\n", list(&cuts, |c| c.to_string())));
        for (name, alg, last) in [("blake3", HashAlg::Blake3, false), ("sha256", HashAlg::Sha256, true)] {
            let d = digest(alg);
            if d.is_empty() {
                out.push_str(&format!("      \"{name}\": []"));
            } else {
                out.push_str(&format!("      \"{name}\": [\n"));
                out.push_str(&list(&d, |h| format!("        \"{h}\"")).replace(", ", ",\n"));
                out.push_str("\n      ]");
            }
            out.push_str(if last { "\n" } else { ",\n" });
        }
        out.push_str(if i + 1 == cases.len() { "    }\n" } else { "    },\n" });
    }
    out.push_str("  ]\n}\n");
    out
}
