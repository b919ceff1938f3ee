//! A workload's prompts held once, however many sweeps use them (issue
//! 29): the real daemon sweeping one big `prompts_dir` from two targets at
//! once, its memory read from /proc against the same daemon with a small
//! folder. Generous bounds, none on time.

mod support;

use std::path::Path;
use std::time::Duration;

use support::binary::Running;
use support::config::Yaml;
use support::exposition::metric_sum;
use support::paths::fresh_dir;
use support::wait;

/// Bytes of documents in the big folder.
const FOLDER_BYTES: usize = 50 << 20;

/// Bytes of one document: about 1,200 tokens, well inside the tiny
/// simulated model's context.
const DOC_BYTES: usize = 6 << 10;

/// Writes `bytes` of documents into a fresh folder (no two alike).
fn folder(name: &str, bytes: usize) -> std::path::PathBuf {
    let dir = fresh_dir(name).join("docs");
    std::fs::create_dir_all(&dir).unwrap();
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];
    for i in 0..bytes.div_ceil(DOC_BYTES) {
        let mut doc = format!("document {i}:");
        let mut n = i;
        while doc.len() < DOC_BYTES {
            doc.push(' ');
            doc.push_str(words[n % words.len()]);
            n = n / 3 + doc.len();
        }
        std::fs::write(dir.join(format!("{i:05}.txt")), doc).unwrap();
    }
    dir
}

/// Two targets of one model (two built-in engines of one profile) sweeping
/// the documents of `docs` at once, a sweep a second.
fn config(docs: &Path, targets: usize) -> String {
    let workloads = format!(
        "workloads:\n  docs:\n    max_completion_tokens: 4\n    prompts_dir: {}\n",
        docs.display()
    );
    let rest: String = std::iter::once("targets:\n".to_string())
        .chain(
            (0..targets).map(|i| format!("  - name: t{i}\n    simulator:\n      profile: tiny\n")),
        )
        .collect();
    Yaml {
        workload: "docs",
        workloads: Some(&workloads),
        levels: "[1, 2]",
        requests_per_level: "4",
        min_requests_per_level: 2,
        sweep_timeout: "30s",
        rest: &rest,
        ..Yaml::default()
    }
    .render()
}

/// A field of /proc/PID/status, in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in\n{text}"))
}

/// Successful sweeps of each target so far.
async fn ok_sweeps(daemon: &Running, targets: usize) -> Result<Vec<f64>, String> {
    let text = daemon.get("/metrics").await.ok_or("no /metrics")?;
    Ok((0..targets)
        .map(|i| {
            metric_sum(
                &text,
                "llmprobe_sweeps_total",
                &[("target", &format!("t{i}")), ("result", "ok")],
            )
        })
        .collect())
}

/// The daemon's peak resident memory (VmHWM, kB) from its start to the end
/// of a first successful sweep of every target of [`config`] (the sweeps
/// start together).
async fn peak_kb(docs: &Path, targets: usize) -> u64 {
    let path = fresh_dir("shared-prompts-config").join("llmprobe.yaml");
    std::fs::write(&path, config(docs, targets)).unwrap();
    // One malloc arena: glibc gives each thread its own, and a copy freed
    // on one thread and built again on another would show as two here.
    let daemon = Running::start(&path, &[("MALLOC_ARENA_MAX", "1")]);
    daemon.ready(Duration::from_secs(60)).await;
    wait::poll(
        "a sweep of every target",
        Duration::from_secs(60),
        || async {
            daemon.process.assert_running();
            match ok_sweeps(&daemon, targets).await {
                Ok(n) if n.iter().all(|&n| n >= 1.0) => Ok(()),
                other => Err(format!("{other:?}\n{}", daemon.process.tail())),
            }
        },
    )
    .await;
    let peak = status_kb(daemon.process.id(), "VmHWM");
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
    peak
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sweeps_of_one_big_prompts_folder_hold_one_copy() {
    let small = folder("shared-prompts-small", DOC_BYTES);
    let big = folder("shared-prompts-big", FOLDER_BYTES);
    let base = peak_kb(&small, 2).await;
    let one = peak_kb(&big, 1).await;
    let two = peak_kb(&big, 2).await;
    let mib = |kb: u64| kb as f64 / 1024.0;
    let folder_kb = (FOLDER_BYTES >> 10) as u64;
    let seen = format!(
        "VmHWM: {:.0} MiB with a small folder, {:.0} MiB with a {} MiB one swept by one target, \
         {:.0} MiB by two",
        mib(base),
        mib(one),
        FOLDER_BYTES >> 20,
        mib(two)
    );
    eprintln!("{seen}");
    // One copy: the parsed prompts and the two sets of bodies, within what
    // check-config counts for them (about five times the text).
    assert!(one.saturating_sub(base) < 5 * folder_kb, "{seen}");
    // The second target's sweep adds less than half the folder; a copy of
    // its own adds two sets of bodies (about twice the folder: 69 MiB more
    // while the copies overlapped, and 48 MiB when two sweeps starting
    // together each built one before either held it).
    assert!(two.saturating_sub(one) < folder_kb / 2, "{seen}");
}
