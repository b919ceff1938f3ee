//! The config loader never panics, whatever the file holds: arbitrary bytes,
//! YAML-ish text built from the schema's own keys and awkward values, and
//! random edits of a valid configuration. Either a config or an error that
//! names the file comes back. (CI runs these; `fuzz/` has the unbounded
//! version.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use llmprobe::config::{self, Env};
use proptest::prelude::*;

mod support;

/// No environment at all: the loader must not depend on the test's.
struct NoEnv;

impl Env for NoEnv {
    fn var(&self, name: &str) -> Option<String> {
        // One variable is set, so that `api_key_env` can resolve.
        (name == "KEY").then(|| "sk-prop-key".to_string())
    }
}

/// A directory of this run, holding the configs and a prompts file they can
/// name (written once: the tests run in parallel and read it). The tests'
/// own directory, which a later run removes: one of this test's own per run
/// was left in `$TMPDIR` for good.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = support::paths::fresh_dir("config-props");
        std::fs::write(dir.join("prompts.jsonl"), "one\n\"two\"\n").unwrap();
        dir
    })
}

/// Loads `bytes` as a config file; checks that failures name the file.
fn load(bytes: &[u8]) {
    let path = dir().join(format!("c-{}.yaml", fastrand::u64(..)));
    std::fs::write(&path, bytes).unwrap();
    let result = config::decode(&path, false).and_then(|f| config::resolve(&path, f, &NoEnv));
    std::fs::remove_file(&path).ok();
    if let Err(e) = result {
        check_error(&path, &e);
    }
}

fn check_error(path: &Path, e: &config::ConfigError) {
    assert!(!e.problems.is_empty());
    let shown = path.display().to_string();
    for p in &e.problems {
        assert!(p.starts_with(&shown), "problem without the file name: {p}");
    }
}

const VALID: &str = r#"listen: "127.0.0.1:9775"
schedule: { interval: 30s, jitter: 5%, max_in_flight_total: 16, sweep_timeout: 1m }
defaults:
  workload: chat
  warmup_requests: 1
  levels: [1, 2, 4]
  requests_per_level: 2x
  min_requests_per_level: 4
  request_timeout: 10s
  slo: { p95_latency: 10s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }
  headroom: 0.9
workloads:
  chat:
    max_completion_tokens: 64
    temperature: 0
    prompts: ["hello"]
  docs:
    prompts_file: prompts.jsonl
targets:
  - name: w1
    base_url: http://127.0.0.1:8000/v1/
    model: m
    api_key_env: KEY
    max_concurrency: 2
    labels: { gpu: L40S }
    workloads: [chat, docs]
  - name: sim
    simulator: { profile: tiny, fail_ratio: 0.1 }
gateway_pairs:
  - { name: gw, direct: w1, through: sim }
web:
  enable_reload: false
"#;

const KEYS: &[&str] = &[
    "listen",
    "schedule",
    "interval",
    "jitter",
    "max_in_flight_total",
    "sweep_timeout",
    "defaults",
    "workload",
    "warmup_requests",
    "levels",
    "requests_per_level",
    "min_requests_per_level",
    "request_timeout",
    "slo",
    "p95_latency",
    "max_shed_ratio",
    "max_error_ratio",
    "headroom",
    "max_concurrency",
    "max_tokens_field",
    "api",
    "top_p",
    "extra_body",
    "workloads",
    "max_completion_tokens",
    "temperature",
    "prompts",
    "prompts_file",
    "targets",
    "name",
    "base_url",
    "simulator",
    "profile",
    "engine",
    "step_base",
    "max_batch",
    "kv_cache_tokens",
    "fail_ratio",
    "fail_status",
    "reset_ratio",
    "seed",
    "model",
    "api_key_env",
    "api_key_file",
    "labels",
    "gateway_pairs",
    "direct",
    "through",
    "web",
    "enable_reload",
    "unknown_key",
    "<<",
];

const VALUES: &[&str] = &[
    "",
    "~",
    "null",
    "0",
    "-1",
    "1",
    "4294967296",
    "18446744073709551616",
    "1e309",
    "-0.0",
    ".nan",
    ".inf",
    "-.inf",
    "NaN",
    "0.5",
    "2",
    "true",
    "no",
    "15m",
    "0s",
    "500ms",
    "99999999999999999999h",
    "1ns",
    "10%",
    "150%",
    "-5%",
    "%",
    "3x",
    "0x",
    "-2x",
    "infx",
    "nanx",
    "[]",
    "[1, 2, 4]",
    "[4, 2, 1]",
    "[0]",
    "[1, 1]",
    "{}",
    "{ a: 1 }",
    "[",
    "{",
    "\"",
    "'",
    "\"unterminated",
    "'it''s'",
    "\"\\u0000\"",
    "http://",
    "http://u:p@h/v1",
    "https://[::1]:8000/v1",
    "http://h/v1?x=1",
    "ftp://h",
    "/dev/null",
    "prompts.jsonl",
    "/nonexistent/file",
    "tiny",
    "stub",
    "max_tokens",
    "both",
    "completions",
    "&a [1, 2]",
    "*a",
    "*undefined",
    "!!binary aGVsbG8=",
    "!!int x",
    "!custom 1",
    "|\n  block",
    ">-\n  folded",
    "- item",
    "0.0.0.0:0",
    "[::]:9775",
    "256.0.0.1:1",
    "ü-ñïçødé",
    "\t",
    "#comment",
    "? complex",
];

/// One line of YAML-ish text: indentation, maybe a list dash, a key from the
/// schema (or junk), and an awkward value.
fn line() -> impl Strategy<Value = String> {
    (
        0usize..5,
        any::<bool>(),
        prop_oneof![
            4 => proptest::sample::select(KEYS).prop_map(str::to_string),
            1 => "[a-z_]{0,12}",
        ],
        prop_oneof![
            4 => proptest::sample::select(VALUES).prop_map(str::to_string),
            1 => "[ -~]{0,20}",
        ],
    )
        .prop_map(|(indent, dash, key, value)| {
            format!(
                "{}{}{key}: {value}",
                "  ".repeat(indent),
                if dash { "- " } else { "" }
            )
        })
}

/// An edit of the valid config: cut a range, insert a value, or overwrite.
#[derive(Debug, Clone)]
enum Edit {
    Cut(usize, usize),
    Insert(usize, String),
    Byte(usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, n)| Edit::Cut(at, n)),
        (
            any::<usize>(),
            prop_oneof![
                proptest::sample::select(VALUES).prop_map(str::to_string),
                line().prop_map(|l| format!("\n{l}\n")),
            ]
        )
            .prop_map(|(at, s)| Edit::Insert(at, s)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Byte(at, b)),
    ]
}

fn apply(edits: &[Edit]) -> Vec<u8> {
    let mut doc = VALID.as_bytes().to_vec();
    for e in edits {
        let len = doc.len().max(1);
        match e {
            Edit::Cut(at, n) => {
                let at = at % len;
                let end = (at + n).min(doc.len());
                doc.drain(at.min(end)..end);
            }
            Edit::Insert(at, s) => {
                let at = at % (doc.len() + 1);
                doc.splice(at..at, s.bytes());
            }
            Edit::Byte(at, b) => {
                if !doc.is_empty() {
                    let at = at % doc.len();
                    doc[at] = *b;
                }
            }
        }
    }
    doc
}

#[test]
fn the_valid_base_config_loads() {
    let path = dir().join("valid.yaml");
    std::fs::write(&path, VALID).unwrap();
    let c = config::decode(&path, false)
        .and_then(|f| config::resolve(&path, f, &NoEnv))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.targets.len(), 2);
    assert_eq!(c.targets[0].workloads[1].prompts.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        load(&bytes);
    }

    #[test]
    fn yaml_ish_text_never_panics(lines in proptest::collection::vec(line(), 0..30)) {
        load(lines.join("\n").as_bytes());
    }

    #[test]
    fn edits_of_a_valid_config_never_panic(edits in proptest::collection::vec(edit(), 1..6)) {
        load(&apply(&edits));
    }
}
