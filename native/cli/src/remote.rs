//! What the store subcommands (`push`, `pull`, `ls`, `rm`, `gc`, `check`) share: the store,
//! namespace and token flags, the error → exit code mapping, and a progress bar fed from the
//! client's counters.

use super::Fail;
use clap::Args;
use cutpoint_store::client::{Client, ClientError, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The store's default address (what `cutpoint serve` listens on by default).
pub const DEFAULT_STORE: &str = "http://127.0.0.1:7373";

#[derive(Args, Clone)]
pub struct StoreArgs {
    /// The store's URL.
    #[arg(long, env = "CUTPOINT_STORE", default_value = DEFAULT_STORE)]
    pub store: String,
    /// The namespace (every name, chunk and query lives in one).
    #[arg(long, env = "CUTPOINT_NS", default_value = "default")]
    pub ns: String,
    /// A bearer token for the namespace (see `cutpoint token`); none for an open store.
    #[arg(long, env = "CUTPOINT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Seconds without progress (no byte read or written) after which a request to the store
    /// is given up; also the longest wait for a connection (at most 30). A slow store that
    /// keeps sending or taking bytes is never cut. Safe requests are then tried again.
    #[arg(long, env = "CUTPOINT_TIMEOUT", value_name = "SECS", default_value = "60", value_parser = parse_secs)]
    pub timeout: f64,
    /// Tries after the first of a request that is safe to repeat (queries, pack uploads, reads;
    /// a pull resumes where its verified bytes end), with backoff; then the command fails (exit 1).
    #[arg(long, env = "CUTPOINT_RETRIES", value_name = "N", default_value_t = cutpoint_store::client::DEFAULT_RETRIES)]
    pub retries: u32,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86400.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds between 0 and 86400 (e.g. 60 or 1.5)")),
    }
}

impl StoreArgs {
    pub fn client(&self) -> Result<Client, Fail> {
        let mut c = Client::with_timeout(&self.store, &self.ns, self.token.clone(), Duration::from_secs_f64(self.timeout)).map_err(fail)?;
        c.retries = self.retries;
        Ok(c)
    }
}

/// Exit codes: 2 bad usage; 3 restored data did not verify; 1 anything else (network, store,
/// local files).
pub fn fail(e: ClientError) -> Fail {
    let code = match e {
        ClientError::Usage(_) => 2,
        ClientError::Verify(_) => 3,
        _ => 1,
    };
    let mut msg = e.to_string();
    if matches!(e, ClientError::Network(_)) && (msg.contains("refused") || msg.contains("os error 111")) {
        msg.push_str(" (is the store running? start one with `cutpoint serve --data DIR`, or give --store URL)");
    }
    Fail { code, msg }
}

/// A progress bar on standard error while `f` runs (only on a terminal, never with `--json`).
pub fn with_progress<T>(show: bool, label: &str, progress: &Progress, f: impl FnOnce() -> T) -> T {
    if !show || !std::io::stderr().is_terminal() {
        return f();
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(label.to_string());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                bar.set_length(progress.total.load(Ordering::Relaxed));
                bar.set_position(progress.processed.load(Ordering::Relaxed));
                let novel = progress.novel_bytes.load(Ordering::Relaxed);
                let sent = progress.sent_bytes.load(Ordering::Relaxed);
                if novel > 0 || sent > 0 {
                    bar.set_message(format!("novel {} sent {}", human(novel), human(sent)));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        bar.finish_and_clear();
        r
    })
}

/// Bytes for people: 1.5 MiB.
pub fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(secs: i64) -> String {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::human(5), "5 B");
        assert_eq!(super::human(1536), "1.5 KiB");
        assert_eq!(super::utc(0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_700_000_000), "2023-11-14 22:13:20");
    }
}
