//! YAML aliases in the main configuration: a valid file with the fuzzer's
//! text after it (the seeds hold anchors, aliases, merge keys and "billion
//! laughs" shapes). Decoding never panics and never expands an alias: it
//! ends within libFuzzer's time and memory limits, and whenever the text
//! holds an alias the parser can see, the file is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprobe::config;

const VALID: &str = "workloads:\n  chat:\n    prompts: [\"hi\"]\ndefaults:\n  workload: chat\ntargets:\n  - name: w\n    base_url: http://127.0.0.1:8000/v1\n    model: m\n";

/// Whether the YAML parser reports an alias before any syntax error.
fn has_alias(text: &str) -> bool {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    loop {
        match parser.next_token() {
            Ok((Event::Alias(_), _)) => return true,
            Ok((Event::StreamEnd, _)) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let Ok(tail) = std::str::from_utf8(input) else {
        return;
    };
    let text = format!("{VALID}{tail}");
    let decoded = config::load::decode_text(&text, "fuzz.yaml", false);
    if has_alias(&text) {
        let e = decoded.expect_err("a file with an alias was accepted");
        assert!(e.problems.iter().all(|p| p.starts_with("fuzz.yaml: ")));
        assert!(
            e.problems.iter().any(|p| p.contains("YAML aliases")),
            "{:?}",
            e.problems
        );
    } else if let Err(e) = decoded {
        assert!(e.problems.iter().all(|p| p.starts_with("fuzz.yaml")));
    }
});
