//! What the operating system says about processes: CPU time, resident
//! memory, load. Linux only (`getrusage`, `/proc`).

use std::time::Duration;

/// User + system CPU time of this whole process so far (every thread).
pub fn self_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct we hand it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The monotonic clock (`CLOCK_MONOTONIC`, which `Instant` reads on Linux)
/// in nanoseconds: one clock for every process of the machine, so that the
/// bench and the truth server can place each other's instants.
pub fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes the timespec we hand it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of another process, summed over its threads from
/// `/proc/PID/task/*/schedstat` (nanoseconds; `/proc/PID/stat` counts in
/// 10 ms ticks, too coarse for a level that lasts a tenth of a second).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut nanos = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        nanos += stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(Duration::from_nanos(nanos))
}

/// Resident and peak resident memory of a process in bytes (VmRSS, VmHWM).
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The 1-minute load average, as `uptime` shows it.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Online CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Established TCP connections (IPv4, this network namespace) whose remote
/// end is `port`: the client side of connections to a local server.
pub fn connections_to(port: u16) -> usize {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return 0;
    };
    let remote = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Fields: sl, local, remote, state (01 = ESTABLISHED).
            f.len() > 3 && f[2].ends_with(&remote) && f[3] == "01"
        })
        .count()
}

/// CPU time of another process from `/proc/PID/stat` (user + system, in
/// clock ticks): unlike [`process_cpu`] it keeps the time of threads that
/// have exited, at the ticks' resolution (10 ms), for spans of seconds.
pub fn process_cpu_ticks(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which ends at the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}
