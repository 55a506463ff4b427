//! The examples' CPU clock (included with `#[path]`; not an example of its own).

/// Seconds of CPU time this process has used (Linux), to see through time-slicing on a busy
/// machine; wall time elsewhere.
#[cfg(target_os = "linux")]
pub fn cpu_now() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: CLOCK_PROCESS_CPUTIME_ID (2) with a valid out-pointer.
    unsafe { clock_gettime(2, &mut t) };
    t.sec as f64 + t.nsec as f64 * 1e-9
}

/// Wall seconds since the first call (no process CPU clock here).
#[cfg(not(target_os = "linux"))]
pub fn cpu_now() -> f64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}
