//! The CLI end to end: output formats, stdin, dedup accounting, errors and exit codes.

use cutpoint_core::{hex, reference_cuts, HashAlg, Profile};
use std::io::Write;
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545F4914F6CDD1D) >> 56) as u8
        })
        .collect()
}

fn tmpfile(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cutpoint-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn chunk_jsonl_matches_reference_and_hashes() {
    let d = data(3 << 20, 5);
    let f = tmpfile("a.bin", &d);
    for (prof, hash) in [("crc32:2k:16k:64k", "blake3"), ("gear:2k:8k:64k", "sha256"), ("rabin:4k:8k:12k", "none")] {
        let out = bin().args(["chunk", f.to_str().unwrap(), "--format", "jsonl", "-p", prof, "--hash", hash, "-t", "2"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let cuts = reference_cuts(&prof.parse::<Profile>().unwrap(), &d);
        let lines: Vec<serde_json::Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), cuts.len(), "{prof}");
        let mut prev = 0usize;
        for (l, &c) in lines.iter().zip(&cuts) {
            assert_eq!(l["offset"].as_u64().unwrap() as usize, prev);
            assert_eq!(l["length"].as_u64().unwrap() as usize, c - prev);
            let alg = HashAlg::parse(hash).unwrap();
            match alg.digest(&d[prev..c]) {
                Some(h) => assert_eq!(l["hash"].as_str().unwrap(), hex(&h)),
                None => assert!(l.get("hash").is_none()),
            }
            prev = c;
        }
    }
}

#[test]
fn stdin_equals_file_whatever_the_backend() {
    let d = data(1 << 20, 9);
    let f = tmpfile("b.bin", &d);
    let from_file = bin().args(["chunk", f.to_str().unwrap()]).output().unwrap();
    assert!(from_file.status.success());
    for b in cutpoint_core::backend::available() {
        let mut child = bin()
            .args(["chunk", "-", "--backend", b.name(), "--lane-segment", "1021"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let d2 = d.clone();
        let w = std::thread::spawn(move || {
            for piece in d2.chunks(4093) {
                stdin.write_all(piece).unwrap();
            }
        });
        let out = child.wait_with_output().unwrap();
        w.join().unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, from_file.stdout, "backend {b}");
    }
}

#[test]
fn stats_counts_dedup_across_files_in_order() {
    let d = data(2 << 20, 11);
    let a = tmpfile("c.bin", &d);
    for jobs in ["1", "2"] {
        let out = bin().args(["stats", "--json", "--jobs", jobs, a.to_str().unwrap(), a.to_str().unwrap()]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["files"][0]["unique_bytes"].as_u64(), Some(d.len() as u64));
        assert_eq!(v["files"][1]["unique_bytes"].as_u64(), Some(0));
        assert_eq!(v["total"]["bytes"].as_u64(), Some(2 * d.len() as u64));
        assert!((v["total"]["dedup_ratio"].as_f64().unwrap() - 2.0).abs() < 1e-9);
        let cuts = reference_cuts(&Profile::default_profile(), &d);
        assert_eq!(v["files"][0]["chunks"].as_u64(), Some(cuts.len() as u64));
        assert_eq!(v["profile"].as_str(), Some("gear:2k:8k:64k"));
        assert!(v["backend"].as_str().is_some());
    }
}

#[test]
fn errors_name_the_problem_and_set_exit_codes() {
    let f = tmpfile("d.bin", b"hello");
    let tmp = std::env::temp_dir();
    let cases: [(&[&str], i32, &str); 6] = [
        (&["chunk", "/nonexistent/x.bin"], 1, "/nonexistent/x.bin"),
        (&["chunk", f.to_str().unwrap(), "-p", "crc32:16k:8k:64k"], 2, "MIN (16k) is larger than AVG"),
        (&["chunk", f.to_str().unwrap(), "-b", "quantum"], 2, "unknown backend 'quantum'"),
        (&["chunk", f.to_str().unwrap(), "--segment-size", "0"], 2, "lane segment must be at least 1"),
        (&["chunk", f.to_str().unwrap(), "--lane-segment", "12q"], 2, "is not a size"),
        (&["stats", tmp.to_str().unwrap()], 1, "is a directory"),
    ];
    for (args, code, msg) in cases {
        let out = bin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: '{err}' lacks '{msg}'");
    }
    // An unsupported forced backend via the environment is an error too, not a silent fallback.
    let out = bin().args(["chunk", f.to_str().unwrap()]).env("CUTPOINT_BACKEND", "nonesuch").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CUTPOINT_BACKEND"));
}

#[test]
fn tiny_and_empty_inputs() {
    let e = tmpfile("empty.bin", b"");
    let out = bin().args(["chunk", e.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let t = tmpfile("tiny.bin", b"x");
    let out = bin().args(["chunk", t.to_str().unwrap(), "--format", "jsonl", "--hash", "none"]).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "{\"offset\":0,\"length\":1}\n");
}

/// Issue #19: an invalid CUTPOINT_BACKEND is named once, and `backends` still lists the
/// backends (then says the variable is invalid, exit 2).
#[test]
fn a_bad_backend_variable_is_named_once_and_backends_still_lists() {
    let f = tmpfile("env.bin", b"hello");
    let out = bin().args(["chunk", f.to_str().unwrap()]).env("CUTPOINT_BACKEND", "nosuch").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("invalid option").count(), 1, "{err}");
    assert!(err.contains("CUTPOINT_BACKEND: unknown backend 'nosuch' (known: scalar"), "{err}");
    assert!(out.stdout.is_empty());

    let out = bin().arg("backends").env("CUTPOINT_BACKEND", "nosuch").output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for b in cutpoint_core::backend::ALL {
        assert!(listed.contains(b.name()), "{listed}");
    }
    assert_eq!(listed.matches('*').count(), 1, "{listed}");
    assert!(err.contains("CUTPOINT_BACKEND: unknown backend 'nosuch'") && err.contains("corrected or unset"), "{err}");
    // Without the variable: the same list, exit 0, then what dispatch chose per family.
    let out = bin().arg("backends").env_remove("CUTPOINT_BACKEND").output().unwrap();
    assert!(out.status.success());
    let n = cutpoint_core::backend::ALL.len();
    assert_eq!(listed.lines().count(), n, "{listed}");
    let plain = String::from_utf8_lossy(&out.stdout);
    // The same backends and statuses. The mark (the default) is what each process measured
    // fastest at first use, which may differ between two processes where two kernels are close
    // (gear on Intel Xeon family 6 model 207: avx512 and interleaved within 25%).
    let unmarked = |t: &str| t.lines().take(n).map(|l| l.get(1..).unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(unmarked(&plain), unmarked(&listed), "{plain}");
    assert_eq!(plain.lines().take(n).filter(|l| l.starts_with('*')).count(), 1, "{plain}");
    assert!(plain.contains("per family"), "{plain}");
}

/// Issue #19: a repeated profile key is refused (core parser), not last-wins.
#[test]
fn a_repeated_profile_key_is_refused() {
    let f = tmpfile("twice.bin", &data(100_000, 3));
    let out = bin().args(["chunk", f.to_str().unwrap(), "-p", "gear:2k:8k:64k:nc=2,nc=3"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("key 'nc' is given twice ('nc=2' and 'nc=3')"), "{err}");
    assert!(out.stdout.is_empty());
}

/// Issue #19: `stats --naive 1` ran at about 1 s per MiB (a chunk per byte); segments below 4k
/// are refused before any file is read.
#[test]
fn naive_segments_have_a_minimum() {
    let f = tmpfile("naive.bin", &data(1 << 20, 4));
    for seg in ["1", "16", "4095", "3k"] {
        let t = std::time::Instant::now();
        let out = bin().args(["stats", "--naive", seg, f.to_str().unwrap()]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{seg}: {err}");
        assert!(err.contains(&format!("--naive '{seg}' is below the smallest segment, 4k")), "{err}");
        assert!(out.stdout.is_empty());
        assert!(t.elapsed().as_secs_f64() < 5.0);
    }
    let out = bin().args(["stats", "--json", "--naive", "4k", f.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "naive:4k");
}
