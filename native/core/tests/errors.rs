//! Errors, never panics: bad profiles, bad options, unknown or unsupported backends, failing
//! readers; and the documented defaults (threads 0 = all cores).

mod common;

use common::{FailAfter, Pieces};
use cutpoint_core::backend::{self, Backend};
use cutpoint_core::{default_threads, reference_cuts, Chunk, Engine, Error, Family, HashAlg, Options, Profile};

#[test]
fn bad_profiles_are_errors_with_reasons() {
    let cases = [
        ("", "expected FAMILY:MIN:AVG:MAX"),
        ("gear", "expected FAMILY:MIN:AVG:MAX"),
        ("gear:2k:8k:64k:nc=1:extra", "expected FAMILY:MIN:AVG:MAX"),
        ("sha1:2k:8k:64k", "unknown hash family"),
        ("crc32:-1:8k:64k", "not a size"),
        ("crc32:2k:8k:99999999999999999999", "not a size"),
        ("crc32:2k:8k:18014398509481984k", "too large"),
        ("crc32:2k::64k", "empty size"),
        ("crc32:2k:4k:2k", "larger than MAX"),
        ("rabin:4k:2k:8k", "larger than AVG"),
        ("rabin:40:64:128", "must be at least the window (48)"),
        ("crc32:256:257:1k", "power of two"),
        ("crc32:1:1:1:window=1", "AVG must be at least 2"),
        ("crc32:2k:8k:64k:window=0", "window must be at least 1"),
        ("crc32:2m:4m:8m:window=2m", "too large"),
        ("gear:2k:8k:64k:nc=7", "out of range"),
        ("gear:2k:8k:64k:nc=99999999999", "out of range"),
        ("gear:32:64:128", "must be at least the window (64)"),
        ("gear:2k:8k:64k:magic=1", "crc32 and rabin only"),
        ("rabin:4k:8k:12k:seed=5", "gear only"),
        ("rabin:4k:8k:12k:nc=1", "gear only"),
        ("crc32:2k:8k:64k:magic=zz", "not a number"),
        ("crc32:2k:8k:64k:magic", "not key=value"),
        ("crc32:2k:8k:64k:bogus=1", "unknown profile key"),
        ("crc32:2k:8k:2g", "larger than the limit"),
    ];
    for (text, want) in cases {
        match text.parse::<Profile>() {
            Err(e @ Error::Profile(_)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "{text:?}: error '{msg}' does not say '{want}'");
            }
            Err(e) => panic!("{text:?}: wrong error kind {e:?}"),
            Ok(p) => panic!("{text:?} was accepted as {p}"),
        }
    }
    // The same checks through the constructor and through Engine::new with a hand-built profile.
    assert!(matches!(Profile::new(Family::Crc32, 100, 8192, 65536), Err(Error::Profile(_))));
    assert!(matches!(Profile::new(Family::Gear, 4096, 2048, 65536), Err(Error::Profile(_))));
    let mut p = Profile::new(Family::Gear, 2048, 8192, 65536).unwrap();
    p.avg = 5000; // not a power of two, bypassing the parser
    assert!(matches!(Engine::new(p, Options::default()), Err(Error::Profile(_))));
    let mut p = Profile::new(Family::Crc32, 2048, 8192, 65536).unwrap();
    p.min = 10; // below the window
    assert!(matches!(Engine::new(p, Options::default()), Err(Error::Profile(_))));
}

#[test]
fn bad_options_are_errors() {
    let p = Profile::default_profile();
    let e = Engine::new(p.clone(), Options { lane_segment: Some(0), ..Options::default() });
    assert!(matches!(e, Err(Error::Config(ref m)) if m.contains("lane segment")), "{:?}", e.err());
    let e = Engine::new(p.clone(), Options { threads: 5000, ..Options::default() });
    assert!(matches!(e, Err(Error::Config(_))), "{:?}", e.err());
    assert!(matches!(HashAlg::parse("md5"), Err(Error::Config(_))));
    assert_eq!(HashAlg::parse("SHA-256").unwrap(), HashAlg::Sha256);
}

#[test]
fn backend_names() {
    for b in backend::ALL {
        match Backend::parse(b.name()) {
            Ok(got) => {
                assert_eq!(got, b);
                assert!(b.is_supported());
                assert_eq!(Backend::parse(&b.name().to_uppercase()).unwrap(), b);
            }
            Err(Error::Config(m)) => {
                assert!(!b.is_supported(), "{}: parse failed but the CPU has it", b.name());
                assert!(m.contains("not supported"), "{m}");
                // Engine::new refuses it too (no kernel that would fault).
                let e = Engine::new(Profile::default_profile(), Options { backend: Some(b), ..Options::default() });
                assert!(matches!(e, Err(Error::Config(_))));
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    for bad in ["", "avx9", "neon ", "scalar2"] {
        match Backend::parse(bad) {
            Err(Error::Config(m)) => assert!(m.contains("unknown backend"), "{bad:?}: {m}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(Backend::avx2().is_some(), Backend::Avx2.is_supported());
    assert_eq!(Backend::avx512().is_some(), Backend::Avx512.is_supported());
    assert_eq!(backend::available(), common::backends());
}

/// `CUTPOINT_BACKEND` is read once per process, so each setting runs in a child process: this
/// test binary re-runs itself with the variable set and only `env_child` selected.
#[test]
fn cutpoint_backend_env_var() {
    if std::env::var_os("CUTPOINT_ERRORS_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut names: Vec<&str> = backend::available().iter().map(|b| b.name()).collect();
    names.extend(["bogus", "simd128"]);
    for name in names {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "env_child", "--nocapture", "--test-threads=1"])
            .env("CUTPOINT_ERRORS_CHILD", "1")
            .env("CUTPOINT_BACKEND", name)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "CUTPOINT_BACKEND={name}: child failed:\n{text}");
        let want = match Backend::parse(name) {
            Ok(b) => format!("CHILD backend={}", b.name()),
            Err(_) => "CHILD error=CUTPOINT_BACKEND".to_string(),
        };
        assert!(text.contains(&want), "CUTPOINT_BACKEND={name}: want '{want}' in:\n{text}");
    }
}

#[test]
fn env_child() {
    if std::env::var_os("CUTPOINT_ERRORS_CHILD").is_none() {
        return;
    }
    match backend::detect() {
        Ok(b) => {
            let e = Engine::new(Profile::default_profile(), Options::default()).unwrap();
            assert_eq!(e.backend(), b);
            println!("CHILD backend={}", b.name());
        }
        Err(e) => {
            // An explicit backend still works when the variable is bad; the default is an error.
            assert!(Engine::new(Profile::default_profile(), Options::default()).is_err());
            let ok = Engine::new(Profile::default_profile(), Options { backend: Some(Backend::Scalar), ..Options::default() });
            assert!(ok.is_ok());
            let msg = e.to_string();
            println!("CHILD error={}", if msg.contains("CUTPOINT_BACKEND") { "CUTPOINT_BACKEND" } else { &msg });
        }
    }
}

#[test]
fn failing_reader_returns_err_not_panic() {
    let data = common::vectors::xorshift_bytes(5, 300_000);
    let p: Profile = "gear:2k:8k:64k".parse().unwrap();
    let want = reference_cuts(&p, &data);
    for b in common::backends() {
        for (threads, ok_bytes, piece) in [(1, 0, 1), (2, 1, 7), (3, 100_000, 4093), (8, 299_999, 1 << 26)] {
            let e = Engine::new(p.clone(), Options { backend: Some(b), threads, span: 10_000, ..Options::default() }).unwrap();
            let r = || FailAfter { inner: Pieces::owned(&data, &[piece]), ok_bytes, given: 0 };
            let direct: Box<dyn Iterator<Item = Result<Chunk, Error>>> = Box::new(e.stream(r()));
            let prefetch: Box<dyn Iterator<Item = Result<Chunk, Error>>> = Box::new(e.stream_prefetch(r()));
            for (how, mut it) in [("stream", direct), ("stream_prefetch", prefetch)] {
                let mut got = Vec::new();
                let err = loop {
                    match it.next() {
                        Some(Ok(c)) => got.push(c.offset as usize + c.length),
                        Some(Err(e)) => break e,
                        None => panic!("{b} t{threads} {how}: stream ended without reporting the read error"),
                    }
                };
                assert!(matches!(err, Error::Io(ref io) if io.kind() == std::io::ErrorKind::BrokenPipe), "{err:?}");
                assert!(err.to_string().contains("disk caught fire"));
                // Nothing after the error, and what came before is a prefix of the right answer
                // that only covers bytes that were actually read.
                assert!(it.next().is_none(), "{how}: items after an error");
                assert!(got.len() <= want.len() && got[..] == want[..got.len()], "{b} t{threads} {how}: wrong chunks before the error");
                assert!(got.last().copied().unwrap_or(0) <= ok_bytes);
            }
        }
    }
}

#[test]
fn zero_threads_means_all_cores() {
    let p: Profile = "crc32:2k:16k:64k".parse().unwrap();
    let e = Engine::new(p.clone(), Options { threads: 0, ..Options::default() }).unwrap();
    assert_eq!(e.threads(), default_threads());
    assert!(e.threads() >= 1);
    let data = common::vectors::xorshift_bytes(9, 500_000);
    assert_eq!(e.cuts(&data), reference_cuts(&p, &data));
    assert_eq!(cutpoint_core::cut(&p, &data).unwrap(), reference_cuts(&p, &data));
    // span 0 = default; a span below 64 is raised to 64.
    let e = Engine::new(p.clone(), Options { threads: 2, span: 1, hash: HashAlg::None, ..Options::default() }).unwrap();
    assert_eq!(e.block_size(), 64 * Engine::spans_per_block(2));
    assert_eq!(e.cuts(&data), reference_cuts(&p, &data));
}
