//! What names one family.

/// Name, help and label names of one family.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Family name.
    pub name: &'static str,
    /// `# HELP` text.
    pub help: &'static str,
    /// Label names, in the order their values are given.
    pub labels: &'static [&'static str],
}
