//! The command-line flags of the table-printing benches: `--name value`.

/// The value after `--name` on the command line, if any.
pub fn value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The value after `--name` parsed, or `default` when absent or unreadable.
pub fn parsed<T: std::str::FromStr>(name: &str, default: T) -> T {
    value(name).and_then(|s| s.parse().ok()).unwrap_or(default)
}
