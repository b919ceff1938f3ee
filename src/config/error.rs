//! How configuration problems are reported: every one collected, each
//! naming the file and the key. A leaf.

use std::fmt;

/// Every problem found in a configuration, each naming file and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// One line per problem: `FILE: KEY: what is wrong`.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.problems.join("\n"))
    }
}

impl std::error::Error for ConfigError {}
