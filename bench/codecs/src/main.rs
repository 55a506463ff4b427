//! Usage: codec-bench FILE...  (8 KiB pieces of each file; prints one row per codec/level)
use std::time::Instant;

fn main() {
    let mut data = Vec::new();
    for f in std::env::args().skip(1) {
        data.extend(std::fs::read(&f).expect("read"));
    }
    let mib = data.len() as f64 / (1 << 20) as f64;
    println!("{:.1} MiB in 8 KiB pieces", mib);
    println!("codec           | stored / raw | ratio | compress MiB/s | decompress MiB/s");
    let cases: &[(&str, u32, i32)] = &[
        ("zstd -1", 0, 1), ("zstd -3", 0, 3), ("zstd -4", 0, 4), ("zstd -5", 0, 5), ("zstd -6", 0, 6), ("zstd -9", 0, 9), ("zstd -19", 0, 19),
        ("ruzstd fastest", 1, 0), ("lz4_flex", 2, 0),
    ];
    for &(name, codec, level) in cases {
        let t = Instant::now();
        let stored = codec_bench::stored_len(codec, level, &data, 8192);
        let ct = t.elapsed().as_secs_f64();
        let frames = codec_bench::compress_all(codec, level, &data, 8192);
        let t = Instant::now();
        let out = codec_bench::decompress_all(codec, &frames, 8192);
        let dt = t.elapsed().as_secs_f64();
        assert_eq!(out, data.len() as u64);
        println!("{name:15} | {:12.3} | {:5.2} | {:13.0} | {:16.0}", stored as f64 / data.len() as f64,
            data.len() as f64 / stored as f64, mib / ct, mib / dt);
    }
}
