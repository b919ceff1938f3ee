//! Tests of loading and resolving whole configurations.

use super::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

struct FakeEnv(HashMap<String, String>);
impl Env for FakeEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

fn load_str(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let dir = std::env::temp_dir().join(format!(
        "llmprobe-config-test-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, yaml).unwrap();
    let env = FakeEnv(
        env.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let result = decode(&path, false).and_then(|f| resolve(&path, f, &env));
    std::fs::remove_dir_all(&dir).ok();
    result
}

const GOOD: &str = r#"
listen: "127.0.0.1:9775"
schedule: { interval: 30s, jitter: 5%, max_in_flight_total: 16 }
defaults:
  workload: chat
  levels: [1, 2, 4]
  requests_per_level: 2x
  slo: { p95_latency: 10s }
workloads:
  chat:
    max_completion_tokens: 64
    prompts: ["hello"]
targets:
  - name: w1
    base_url: http://127.0.0.1:8000/v1/
    model: m
    api_key_env: KEY
    max_concurrency: 2
    labels: { gpu: L40S }
"#;

#[test]
fn good_config_resolves_with_defaults_and_overrides() {
    let c = load_str(GOOD, &[("KEY", "sk-test-key")]).unwrap();
    assert_eq!(c.schedule.interval, Duration::from_secs(30));
    assert!((c.schedule.jitter - 0.05).abs() < 1e-12);
    let t = &c.targets[0];
    assert_eq!(t.endpoint, Endpoint::Url("http://127.0.0.1:8000/v1".into()));
    assert_eq!(t.levels, vec![1, 2], "capped by max_concurrency");
    assert_eq!(t.requests_per_level, RequestsPerLevel::PerConcurrency(2.0));
    assert_eq!(t.slo.p95_latency, Duration::from_secs(10));
    assert_eq!(t.slo.max_shed_ratio, 0.05);
    assert_eq!(t.headroom, 0.9);
    assert_eq!(t.workloads[0].max_completion_tokens, 64);
    assert_eq!(t.api_key.as_ref().unwrap().expose(), "sk-test-key");
    assert!(
        !format!("{t:?}").contains("sk-test-key"),
        "Debug must not show the key"
    );
}

#[test]
fn every_body_key_of_its_own_is_sent_and_refused_in_extra_body() {
    let mut c = load_str(GOOD, &[("KEY", "sk-test-key")]).unwrap();
    let t = &c.targets[0];
    let names: Vec<&str> = t.own_body_keys().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names, BODY_KEYS,
        "BODY_KEYS and Target::own_body_keys differ"
    );
    assert!(
        t.request_options().body_keys.is_empty(),
        "none set: none sent"
    );
    let t = std::sync::Arc::make_mut(&mut c.targets[0]);
    t.top_p = Some(0.5);
    assert_eq!(t.request_options().body_keys["top_p"], 0.5);
    for k in BODY_KEYS {
        assert!(is_reserved_body_key(k), "{k} may not be in extra_body");
    }
    assert!(is_reserved_body_key("model") && !is_reserved_body_key("min_p"));
}

#[test]
fn requests_per_level_counts() {
    let r = RequestsPerLevel::PerConcurrency(3.0);
    assert_eq!(r.count(1, 8), 8);
    assert_eq!(r.count(4, 8), 12);
    assert_eq!(RequestsPerLevel::Fixed(5).count(16, 1), 16);
}

fn problems(yaml: &str, env: &[(&str, &str)]) -> String {
    load_str(yaml, env).unwrap_err().to_string()
}

#[test]
fn a_key_shorter_than_8_characters_is_refused_without_being_shown() {
    let e = problems(GOOD, &[("KEY", "bad")]);
    assert!(
        e.contains("targets[0] (w1).api_key_env: environment variable `KEY`: the key is 3 characters long: keys shorter than 8 are refused"),
        "{e}"
    );
    assert!(!e.contains("bad\n") && !e.contains("`bad`"), "{e}");
    // Trimmed first: padding does not make a key long enough.
    assert!(load_str(GOOD, &[("KEY", "  sk-1234  ")]).is_err());
    assert!(
        load_str(GOOD, &[("KEY", "sk-12345")]).is_ok(),
        "8 characters"
    );
}

#[test]
fn unknown_key_is_named() {
    let e = problems(
        &GOOD.replace("max_concurrency: 2", "max_concurency: 2"),
        &[("KEY", "sk-test-key")],
    );
    assert!(e.contains("llmprobe.yaml"), "{e}");
    assert!(e.contains("max_concurency"), "{e}");
}

#[test]
fn sizes_that_would_exhaust_memory_or_overflow_are_rejected() {
    let y = GOOD
        .replace("interval: 30s", "interval: 580000000000y")
        .replace("levels: [1, 2, 4]", "levels: [1, 2, 40000]")
        .replace("max_concurrency: 2", "requests_per_level: 1e300x")
        .replace("requests_per_level: 2x", "warmup_requests: 4000000");
    let e = problems(&y, &[("KEY", "sk-test-key")]);
    assert!(
        e.contains("schedule.interval: must be at most 365days"),
        "{e}"
    );
    assert!(
        e.contains("defaults.levels: a level must be at most 10000"),
        "{e}"
    );
    assert!(
        e.contains("defaults.warmup_requests: must be at most 1000000"),
        "{e}"
    );
    assert!(
            e.contains("targets[0] (w1).requests_per_level: gives 18446744073709551615 requests at concurrency 2"),
            "{e}"
        );
}

#[test]
fn bad_duration_is_named() {
    let e = problems(
        &GOOD.replace("interval: 30s", "interval: 30 parsecs"),
        &[("KEY", "sk-test-key")],
    );
    assert!(e.contains("schedule.interval"), "{e}");
}

#[test]
fn unset_key_variable_and_missing_model_are_both_reported() {
    let e = problems(&GOOD.replace("model: m", ""), &[]);
    assert!(e.contains("targets[0] (w1).model: missing"), "{e}");
    assert!(e.contains("`KEY` is not set"), "{e}");
    assert_eq!(e.lines().count(), 2, "{e}");
}

#[test]
fn level_and_headroom_and_workload_problems() {
    let y = GOOD
        .replace("levels: [1, 2, 4]", "levels: [1, 4, 2]")
        .replace("workload: chat", "workload: nope")
        .replace("slo:", "headroom: 1.5\n  slo:");
    let e = problems(&y, &[("KEY", "sk-test-key")]);
    assert!(
        e.contains("defaults.levels: must be strictly increasing"),
        "{e}"
    );
    assert!(e.contains("defaults.headroom"), "{e}");
    assert!(
        e.contains("defaults.workload: workload `nope` is not defined"),
        "{e}"
    );
}

#[test]
fn duplicate_targets_and_credentials_in_url() {
    let y = format!("{GOOD}  - name: w1\n    base_url: http://u:p@127.0.0.1:1/v1\n    model: m\n");
    let e = problems(&y, &[("KEY", "sk-test-key")]);
    assert!(e.contains("duplicate target name `w1`"), "{e}");
    assert!(e.contains("must not hold credentials"), "{e}");
    assert!(
        !e.contains("u:p@"),
        "the URL's secret must not be echoed: {e}"
    );
}

#[test]
fn bad_percent_and_requests_per_level() {
    let e = problems(
        &GOOD.replace("jitter: 5%", "jitter: lots"),
        &[("KEY", "sk-test-key")],
    );
    assert!(
        e.ends_with("schedule.jitter: `lots` is not a percentage like `10%`"),
        "{e}"
    );
    let e = problems(&GOOD.replace("2x", "twice"), &[("KEY", "sk-test-key")]);
    assert!(
        e.ends_with(
            "defaults.requests_per_level: expected `Nx` (N times the concurrency) or a count"
        ),
        "{e}"
    );
}

const PAIRS: &str = r#"
  - name: gw
    base_url: http://127.0.0.1:8001/v1
    model: m
gateway_pairs:
"#;

#[test]
fn gateway_pair_defaults_and_overrides() {
    let y = format!(
            "{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: gw }}\n  - {{ name: b, direct: w1, through: gw, concurrency: 4, requests: 100, workload: chat }}\n"
        );
    let c = load_str(&y, &[("KEY", "sk-test-key")]).unwrap();
    let a = &c.gateway_pairs[0];
    assert_eq!((a.concurrency, a.requests), (1, 40));
    assert_eq!(
        a.workload.name, "chat",
        "the direct target's first workload"
    );
    let b = &c.gateway_pairs[1];
    assert_eq!((b.concurrency, b.requests), (4, 100));
}

#[test]
fn gateway_pair_problems_are_named() {
    let y = format!(
            "{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: w1, concurrency: 0 }}\n  - {{ name: a, direct: nope, through: gw, requests: 0, workload: none }}\n"
        );
    let e = problems(&y, &[("KEY", "sk-test-key")]);
    for want in [
            "llmprobe.yaml: gateway_pairs[0] (a).through: must differ from `direct` (both are `w1`)",
            "llmprobe.yaml: gateway_pairs[0] (a).concurrency: must be at least 1",
            "llmprobe.yaml: gateway_pairs[1] (a).name: duplicate pair name `a`",
            "llmprobe.yaml: gateway_pairs[1] (a).direct: target `nope` is not defined",
            "llmprobe.yaml: gateway_pairs[1] (a).requests: must be at least 1",
            "llmprobe.yaml: gateway_pairs[1] (a).workload: workload `none` is not defined under `workloads`",
        ] {
            assert!(e.contains(want), "missing `{want}` in:\n{e}");
        }
    assert_eq!(e.lines().count(), 6, "{e}");
    let e = problems(
        &format!("{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: gw, conc: 2 }}\n"),
        &[("KEY", "sk-test-key")],
    );
    assert!(
        e.contains("gateway_pairs[0].conc: unknown field `conc`"),
        "{e}"
    );
}

#[test]
fn missing_file_is_named() {
    let e = decode(Path::new("/nonexistent/llmprobe.yaml"), false)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "/nonexistent/llmprobe.yaml: file not found");
}

#[test]
fn the_prompt_memory_tally_counts_prompts_once_and_bodies_per_model() {
    // A 300,000-character prompt: its JSON text is 300,030 bytes.
    let yaml = format!(
        "workloads:\n  w:\n    max_completion_tokens: 8\n    prompts: ['{}']\n\
         targets:\n  - {{name: a, base_url: 'http://127.0.0.1:9/v1', model: m1, workloads: [w]}}\n\
         \x20 - {{name: b, base_url: 'http://127.0.0.1:9/v1', model: m1, workloads: [w]}}\n\
         \x20 - {{name: c, base_url: 'http://127.0.0.1:9/v1', model: m2, workloads: [w]}}\n",
        "x".repeat(300_000)
    );
    let config = load_str(&yaml, &[]).unwrap();
    let [a, b, c] = [0, 1, 2].map(|i| config.targets[i].clone());
    let text = 300_030;
    let mut tally = prompt_memory::Tally::default();
    assert_eq!(tally.add(&a), text * 5, "parsed three times, bodies twice");
    assert_eq!(tally.add(&b), 0, "the same model shares the bodies");
    // Another model's bodies do not fit under a cap one byte short.
    assert!(!tally.add_within(&c, text * 7 - 1));
    assert_eq!(tally.total(), text * 5, "a refused target adds nothing");
    assert!(tally.add_within(&c, text * 7));
    assert_eq!(tally.total(), text * 7);
    assert_eq!(prompt_memory::needed(&config.targets), text * 7);
}

#[test]
fn prompts_over_the_prompt_memory_cap_are_refused_naming_the_key() {
    // 300,000 characters of prompt: about 1.5 MiB parsed and as bodies.
    let yaml = format!(
        "max_prompt_memory_mib: 1\nworkloads:\n  w:\n    max_completion_tokens: 8\n    prompts: ['{}']\n\
         targets:\n  - {{name: t, base_url: 'http://127.0.0.1:9/v1', model: m, workloads: [w]}}\n",
        "x".repeat(300_000)
    );
    let e = problems(&yaml, &[]);
    assert!(
        e.contains("llmprobe.yaml: max_prompt_memory_mib: the targets' prompts need about 1.4 MiB"),
        "{e}"
    );
    assert!(load_str(&yaml.replace("max_prompt_memory_mib: 1\n", ""), &[]).is_ok());
    let zero = problems(&yaml.replace("mib: 1", "mib: 0"), &[]);
    assert!(
        zero.contains("max_prompt_memory_mib: must be at least 1"),
        "{zero}"
    );
}
