//! Every kind of bad configuration is rejected by `check-config` with exit
//! code 1 and a message naming the file and the key: the real binary runs on
//! each `testdata/bad-*.yml` and its stderr must equal `bad-*.expected`
//! (with `<root>` standing for the repository, should a path be absolute).

mod support;

use support::binary::llmprobe;
use support::paths::repo;

#[test]
fn each_bad_config_gives_its_expected_message() {
    let root = repo();
    let mut cases: Vec<_> = std::fs::read_dir(root.join("testdata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("bad-") && n.ends_with(".yml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "{cases:?}");

    let mut failures = Vec::new();
    for case in &cases {
        let config = format!("testdata/{case}");
        let expected_path = root.join(config.replace(".yml", ".expected"));
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        let out = llmprobe()
            .args(["check-config", "--config", &config])
            .env_remove("LLMPROBE_BAD_CONFIG_TEST_UNSET")
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        let stderr =
            String::from_utf8_lossy(&out.stderr).replace(&*root.to_string_lossy(), "<root>");
        if out.status.code() != Some(1) {
            failures.push(format!("{case}: exit status {:?}", out.status));
        }
        if !out.stdout.is_empty() {
            failures.push(format!(
                "{case}: unexpected stdout: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        if stderr != expected {
            failures.push(format!(
                "{case}:\n  expected: {expected:?}\n  got:      {stderr:?}"
            ));
        }
        let first = stderr.lines().next().unwrap_or("");
        if !first.starts_with(&format!("{config}: ")) {
            failures.push(format!(
                "{case}: message does not start with the file: {first}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
