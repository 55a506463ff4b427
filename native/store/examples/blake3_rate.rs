//! BLAKE3 of a file's bytes on one core: the yardstick of the store's ingest CPU (issue #28:
//! the store's CPU per GiB of a first push ÷ this). The file is read once first (so it is in
//! the page cache), then hashed from memory in 8 KiB pieces (one digest each, as the store
//! hashes chunks) on this thread; prints one JSON object: bytes, CPU seconds of the hashing,
//! seconds per GiB.
//!
//!   cargo run --release -p cutpoint-store --example blake3_rate -- FILE [--max-bytes N]

use std::io::Read;

fn thread_cpu_s() -> f64 {
    let mut ts = libc_timespec { tv_sec: 0, tv_nsec: 0 };
    // CLOCK_THREAD_CPUTIME_ID = 3 on Linux.
    unsafe { clock_gettime(3, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[repr(C)]
struct libc_timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clk: i32, ts: *mut libc_timespec) -> i32;
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = args.get(1).expect("usage: blake3_rate FILE [--max-bytes N]");
    let max: usize = args
        .iter()
        .position(|a| a == "--max-bytes")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("--max-bytes: a number"))
        .unwrap_or(usize::MAX);
    let mut data = Vec::new();
    std::fs::File::open(file)
        .expect("open")
        .take(max as u64)
        .read_to_end(&mut data)
        .expect("read");
    let mut best = f64::MAX;
    let mut x = 0u8;
    for _ in 0..3 {
        let t = thread_cpu_s();
        for piece in data.chunks(8192) {
            x ^= blake3::hash(piece).as_bytes()[0];
        }
        best = best.min(thread_cpu_s() - t);
    }
    let gib = data.len() as f64 / (1u64 << 30) as f64;
    println!(
        "{{\"bytes\":{},\"cpu_s\":{best:.4},\"s_per_gib\":{:.4},\"check\":{x}}}",
        data.len(),
        best / gib
    );
}
