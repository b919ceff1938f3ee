//! Any bytes as a configuration file: decoding and validation never panic,
//! and every problem reported names the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprobe::config::{self, Env};

struct NoEnv;

impl Env for NoEnv {
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

fuzz_target!(|input: &[u8]| {
    let dir = std::env::temp_dir().join(format!("llmprobe-fuzz-config-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("llmprobe.yaml");
    if std::fs::write(&path, input).is_err() {
        return;
    }
    match config::decode(&path, false).and_then(|f| config::resolve(&path, f, &NoEnv)) {
        Ok(_) => {}
        Err(e) => {
            let shown = path.display().to_string();
            assert!(e.problems.iter().all(|p| p.starts_with(&shown)));
        }
    }
});
