//! MT-FBC: TTTD coarse chunking and frequency-based chunking (FBC) with a multi-threaded second
//! stage, after Jiang, Zhao & Zheng, "Enhance Data De-Duplication Performance With Multi-Thread
//! Chunking Algorithm" (SCU COEN 283, 2014; `papers/mtfbc.txt`), which builds on Lu, Jin & Du,
//! "Frequency Based Chunking for Data De-Duplication" (MASCOTS 2010) and Eshghi & Tang's TTTD.
//!
//! An alternative chunker to measure against SS-CDC; it does not take part in the chunking
//! invariance of the SS-CDC engines (its boundaries are its own).
//!
//! # TTTD ([`Tttd`])
//! Two thresholds (`Tmin`, `Tmax`) and two divisors (`D`, backup `D'`), Eshghi & Tang's
//! pseudo-code, over the core's rolling hashes ([`crate::rolling::Tables`], Rabin by default as in
//! the report). See [`tttd`] for the exact rule. Report parameters ([`TttdParams::paper`]):
//! `Tmin` 1 B, `Tmax` 100 KB, `D` 8 KB, `D'` 4 KB, window 64 B.
//!
//! # FBC ([`Fbc`])
//! FBC reads the stream twice (report, section 2): pass 1 ([`Fbc::observe`]) estimates
//! sub-chunk frequencies, pass 2 ([`Fbc::chunk`]) cuts. Both start from TTTD coarse chunks.
//!
//! * **Candidates.** Every `sub_size`-byte window (report: 512 B) lying wholly inside one coarse
//!   chunk. (Choice: candidates never straddle a coarse boundary, so each coarse chunk is an
//!   independent unit of work, which is what lets the second stage run on any thread.)
//! * **Prefiltering** (sample density `r`, report: 32). A candidate is examined only when the
//!   rolling hash of its own bytes (same family as TTTD, window = `sub_size`) satisfies
//!   `h mod r == r - 1`. (Choice: sampling by content, not by position, so a repeated sub-chunk
//!   is sampled at every occurrence.)
//! * **Fingerprint** ([`CandidateKey`]). By default an examined candidate is named by its BLAKE3
//!   digest: 128 bits key the counting table, the other 128 bits give the Bloom probes. (The
//!   report keys the table with 20-byte values — a cryptographic fingerprint — and probes with
//!   Murmur3-128.) [`CandidateKey::Rolling`] names it instead by two rolling hashes of its
//!   bytes (Rabin and CRC-32, 85 bits), rolled along with the sampling hash: no second pass
//!   over the candidate's bytes, which makes FBC's second stage about as costly as TTTD, the
//!   balance the report describes. Frequencies only steer chunking; chunks are still named
//!   by the store's cryptographic fingerprint.
//! * **Filtering** (report: 3 Bloom filters of 800 KB). The filters are probed in parallel, one
//!   probe each; a candidate is *present* when all its bits are set. A candidate not present is
//!   inserted and goes no further: most candidates occur once, and the filters keep them out of
//!   the table.
//! * **Counting table.** A candidate found present is counted in the table (one entry per
//!   distinct candidate). Its estimated frequency is `count + 1`, the `+ 1` being the sighting the
//!   filters absorbed. (The report lists "counting bias: 5" without defining it; it is not used
//!   here. A Bloom false positive can only add a count of 1 to a never-seen candidate, far below
//!   the threshold.)
//! * **Frequency threshold** (report: 5). Pass 2 scans each coarse chunk again; from left to
//!   right, every examined candidate with estimate `>= threshold` that does not overlap the
//!   frequent candidate chosen before it is cut out as a chunk of its own ([`FbcChunk::frequent`]);
//!   the bytes between chosen candidates, and around them up to the coarse boundaries, become
//!   chunks. A coarse chunk with no frequent candidate stays whole, so with an empty state FBC's
//!   chunks are TTTD's.
//!
//! # Threads ([`Workers`])
//! As in the report (section 5): the calling thread is the master; it runs TTTD and hands each
//! coarse chunk (a *buffer*; at most `buffers` in flight, default `max(2 * workers, 6)` as in the
//! report) to a pool of `workers` FBC threads (rayon), which scan it for candidates and
//! fingerprint them. `workers = 0` runs the same steps on one thread (the report's
//! "single-stream"). Pass 2 uses the same pipeline.
//!
//! Deviation, for determinism: the report lets workers update the shared filters and table
//! directly (filters unlocked, table under a mutex), and accepts that the result then depends on
//! thread timing (section 3). Here workers only compute; the master applies their updates to the
//! filters and the table in stream order, as results arrive. The filters and table after pass 1,
//! and the chunks of pass 2, are therefore identical for every `workers` and `buffers`, and
//! equal to the single-stream run (tested). The update is a few memory probes per examined
//! candidate (one in `r` positions); the expensive part — rolling the `sub_size`-byte window
//! over every position and hashing the examined candidates — is what the workers do.
//!
//! Without the `parallel` feature (wasm32), every `Workers` value runs single stream.

mod bloom;
pub mod fbc;
mod key;
pub mod tttd;

pub use fbc::{CandidateKey, Fbc, FbcChunk, FbcParams, FrequencyState, RunStats, Workers};
pub use tttd::{Tttd, TttdCuts, TttdParams};
