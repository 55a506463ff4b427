//! `cutpoint stats --rapid`: comparison with regular CDC, hint sources, errors and exit codes.

use cutpoint_core::datagen::{self, ModKind, VersionSpec};
use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
}

fn dataset(tag: &str) -> (PathBuf, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("cutpoint-cli-rapid-{}-{tag}", std::process::id()));
    let spec = VersionSpec {
        base_size: 3 << 20,
        versions: 3,
        mods: 8,
        mod_size: 100,
        region_percent: 100.0,
        kind: ModKind::InsertDelete,
        seed: 5,
    };
    let paths = datagen::write_versions_spec(&dir, &spec).unwrap();
    (dir, paths.iter().map(|p| p.to_str().unwrap().to_string()).collect())
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn fpt_keeps_regular_boundaries_and_dedup() {
    let (dir, files) = dataset("fpt");
    for prof in ["gear:2k:8k:64k", "rabin:4k:8k:12k"] {
        let mut args = vec!["stats", "--json", "-p", prof, "-t", "2", "--rapid", "ff+rwt+fpt"];
        args.extend(files.iter().map(|s| s.as_str()));
        let v = json(&args);
        let c = &v["comparison"];
        assert_eq!(c["same_boundaries"], true, "{v}");
        assert_eq!(c["dedup_ratio_vs_regular"].as_f64().unwrap(), 1.0);
        assert_eq!(c["chunk_overlap"].as_f64().unwrap(), 1.0);
        assert!(v["dedup_ratio"].as_f64().unwrap() > 2.5, "{v}");
        assert!(v["hit_ratio_by_position"][0].as_f64().unwrap() > 0.8, "{v}");
        assert!(
            v["stats"]["skipped_positions"].as_u64().unwrap() > v["bytes"].as_u64().unwrap() / 2,
            "{v}"
        );
        // The regular `stats` on the same files reports the same dedup ratio.
        let mut args = vec!["stats", "--json", "-p", prof];
        args.extend(files.iter().map(|s| s.as_str()));
        let r = json(&args);
        let want = r["total"]["dedup_ratio"].as_f64().unwrap();
        assert!((v["dedup_ratio"].as_f64().unwrap() - want).abs() < 1e-9, "{want} {v}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn hint_cache_and_base_recipe() {
    let (dir, files) = dataset("hints");
    let cache = dir.join("hints.bin");
    let cache_s = cache.to_str().unwrap();
    let recipe = dir.join("base.recipe");
    let recipe_s = recipe.to_str().unwrap();
    // Base file alone: writes the cache and the base recipe.
    let v = json(&[
        "stats",
        "--json",
        "--rapid",
        "ff+rwt",
        "--hints",
        cache_s,
        "--save-recipe",
        recipe_s,
        &files[0],
    ]);
    assert!(v["hints_saved"].as_u64().unwrap() > 100, "{v}");
    assert!(std::fs::read_to_string(&recipe)
        .unwrap()
        .starts_with("cutpoint-recipe 1\nprofile gear:2k:8k:64k\n"));
    // The next version with the cache: mostly hinted.
    let v = json(&["stats", "--json", "--rapid", "ff+rwt", "--hints", cache_s, &files[1]]);
    assert!(v["hints_loaded"].as_u64().unwrap() > 100, "{v}");
    assert!(
        v["files"][0]["hinted_chunks"].as_u64().unwrap() * 10 > v["chunks"].as_u64().unwrap() * 8,
        "{v}"
    );
    // The same with the base recipe instead, FF+RWT+FPT: exact.
    let v = json(&[
        "stats",
        "--json",
        "--rapid",
        "ff+rwt+fpt",
        "--base",
        recipe_s,
        &files[1],
    ]);
    assert_eq!(v["comparison"]["same_boundaries"], true, "{v}");
    assert!(
        v["files"][0]["hinted_chunks"].as_u64().unwrap() * 10 > v["chunks"].as_u64().unwrap() * 8,
        "{v}"
    );
    // Another profile: the cache and the recipe are refused with exit code 2, naming the file.
    for (flag, path) in [("--hints", cache_s), ("--base", recipe_s)] {
        let out = bin()
            .args(["stats", "-p", "gear:4k:8k:64k", "--rapid", "ff", flag, path, &files[1]])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("gear:2k:8k:64k") && err.contains("gear:4k:8k:64k"),
            "{flag}: {err}"
        );
    }
    // A damaged cache is an input error (exit 1), not silently ignored.
    let mut bytes = std::fs::read(&cache).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 0xff;
    std::fs::write(&cache, &bytes).unwrap();
    let out = bin()
        .args(["stats", "--rapid", "ff", "--hints", cache_s, &files[1]])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn usage_errors() {
    let (dir, files) = dataset("usage");
    let f = files[0].as_str();
    for (args, want) in [
        (vec!["stats", "--rapid", "ff+xx", f], "unknown RapidCDC criterion"),
        (vec!["stats", "--rapid", "ff", "--jobs", "2", f, f], "--jobs 1"),
        (vec!["stats", "--rapid", "ff", "--hash", "none", f], "fingerprints"),
        (
            vec!["stats", "--rapid", "ff", "--hint-list", "0", f],
            "hint list length",
        ),
        (vec!["stats", "--rapid", "ff", "--naive", "1m", f], "--naive"),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Hint options without --rapid are a usage error too.
    let out = bin().args(["stats", "--hint-list", "3", f]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(dir).unwrap();
}

fn stdout(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn chunk_rapid_prints_rapid_chunks() {
    let (dir, files) = dataset("chunk");
    let recipe = dir.join("v0.recipe").to_str().unwrap().to_string();
    stdout(&["stats", "-t", "2", "--rapid", "ff+rwt+fpt", "--no-compare", "--save-recipe", &recipe, &files[0]]);
    let regular = stdout(&["chunk", "--format", "jsonl", "-t", "2", &files[1]]);
    let fpt = stdout(&["chunk", "--format", "jsonl", "-t", "2", "--rapid", "ff+rwt+fpt", "--base", &recipe, &files[1]]);
    // FF+RWT+FPT keeps the regular boundaries and fingerprints.
    assert_eq!(fpt, regular);
    for crit in ["ff", "ff+mt", "ff+rwt"] {
        let out = bin()
            .args(["chunk", "--format", "jsonl", "-t", "2", "--rapid", crit, "--base", &recipe, &files[1]])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        // Contiguous chunks covering the file; statistics on standard error.
        let mut at = 0u64;
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["offset"].as_u64().unwrap(), at, "{crit}");
            at += v["length"].as_u64().unwrap();
            assert_eq!(v["hash"].as_str().unwrap().len(), 64);
        }
        assert_eq!(at, std::fs::metadata(&files[1]).unwrap().len());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(&format!("rapid {crit}:")) && err.contains("hinted"), "{err}");
    }
    // The hint cache is written back, and a recipe of this file saved.
    let cache = dir.join("hints.bin").to_str().unwrap().to_string();
    let rec2 = dir.join("v1.recipe").to_str().unwrap().to_string();
    stdout(&["chunk", "--rapid", "ff", "--hints", &cache, "--save-recipe", &rec2, &files[1]]);
    assert!(std::fs::metadata(&cache).unwrap().len() > 100);
    assert!(std::fs::read_to_string(&rec2).unwrap().starts_with("cutpoint-recipe 1\n"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue #19: a usage error is reported before any work: `--hints-max` below the cache's header
/// used to print every chunk (or chunk every file) and only then fail; an unwritable
/// `--save-recipe` / `--hints` path is found before the input is read too.
#[test]
fn options_are_checked_before_any_chunk() {
    let (dir, files) = dataset("early");
    let cache = dir.join("cache");
    let cache_s = cache.to_str().unwrap();
    for max in ["0", "1", "87"] {
        for cmd in ["chunk", "stats"] {
            let mut args = vec![cmd, "--rapid", "ff+rwt", "--hints", cache_s, "--hints-max", max, &files[0]];
            if cmd == "stats" {
                args.push(&files[1]);
            }
            let out = bin().args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("--hints-max '{max}' is below the smallest hint cache (88 bytes")),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}: printed before the error");
            assert!(!cache.exists() && !dir.join("cache.tmp").exists());
        }
    }
    // The header's size is enough (a cache with no hints).
    let out = bin()
        .args(["chunk", "--rapid", "ff+rwt", "--hints", cache_s, "--hints-max", "88", &files[0]])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(&cache).unwrap().len(), 88);

    let missing = dir.join("no-such-dir").join("r");
    let missing_s = missing.to_str().unwrap();
    let dir_s = dir.to_str().unwrap();
    for (flag, path, want) in [
        ("--save-recipe", missing_s, "cannot be written: No such file or directory"),
        ("--save-recipe", dir_s, "is a directory"),
        ("--hints", missing_s, "cannot be written: No such file or directory"),
    ] {
        for cmd in ["chunk", "stats"] {
            let out = bin().args([cmd, "--rapid", "ff", flag, path, &files[0]]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{cmd} {flag} {path}: {err}");
            assert!(err.contains(&format!("{flag} {path}: {want}")), "{cmd}: {err}");
            assert!(out.stdout.is_empty(), "{cmd} {flag}: printed before the error");
        }
    }
    // A good --save-recipe leaves the recipe and no temporary file.
    let r = dir.join("ok.recipe");
    let out = bin()
        .args(["chunk", "--rapid", "ff", "--save-recipe", r.to_str().unwrap(), &files[0]])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&r).unwrap().starts_with("cutpoint-recipe 1\n"));
    assert!(!dir.join("ok.recipe.tmp").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue #19: a bad recipe's path is printed once ("cutpoint: r: r: recipe line ..." before),
/// and a binary file is "not a cutpoint recipe" (was "stream did not contain valid UTF-8").
#[test]
fn bad_recipes_are_named_once() {
    let (dir, files) = dataset("badrecipe");
    let good = dir.join("good.recipe");
    let out = bin()
        .args(["chunk", "--rapid", "ff", "--save-recipe", good.to_str().unwrap(), &files[0]])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&good).unwrap();
    let truncated = dir.join("truncated.recipe");
    std::fs::write(&truncated, &text[..text.rfind("end ").unwrap()]).unwrap();
    let binary = dir.join("binary.recipe");
    std::fs::write(&binary, (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8 | 0x80).collect::<Vec<u8>>()).unwrap();
    let missing = dir.join("missing.recipe");
    for (path, want) in [
        (&truncated, "recipe truncated: expected more chunks or the 'end' line"),
        (&binary, "recipe line 1: not a cutpoint recipe"),
        (&missing, "No such file or directory"),
    ] {
        let p = path.to_str().unwrap();
        for cmd in ["chunk", "stats"] {
            let out = bin().args([cmd, "--rapid", "ff", "--base", p, &files[1]]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{cmd} {p}: {err}");
            assert!(err.starts_with(&format!("cutpoint: --base {p}: ")), "{err}");
            assert_eq!(err.matches(p).count(), 1, "{err}");
            assert!(err.contains(want), "{cmd} {p}: {err}");
            assert!(out.stdout.is_empty());
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}
