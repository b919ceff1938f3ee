//! The JSON document of `llmprobe sweep --format json`: one type, written by
//! the sweep and read back by `llmprobe report` (and documented in the
//! README), so that what is written is exactly what can be read.

use serde::{Deserialize, Serialize};

use crate::stats::pair_report::PairReport;
use crate::stats::report::SweepReport;

/// Version of the JSON document's shape; bumped on incompatible changes.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// The reports of one `llmprobe sweep`, as written and as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Shape of the document; only [`JSON_FORMAT_VERSION`] is read.
    pub format_version: u32,
    /// Version of llmprobe that wrote it.
    pub llmprobe_version: String,
    /// True when Ctrl-C stopped the sweep: the reports hold only what was
    /// measured by then (absent, so false, in documents written before it).
    // Added without a version bump: readers of version 1 ignore unknown keys.
    #[serde(default)]
    pub partial: bool,
    /// One report per target.
    pub targets: Vec<SweepReport>,
    /// Gateway pairs (absent from documents written before pairs existed).
    // Added without a version bump: readers of version 1 ignore unknown keys.
    #[serde(default)]
    pub gateway_pairs: Vec<PairReport>,
}

impl Document {
    /// The document of these reports, written by this llmprobe.
    pub fn new(targets: Vec<SweepReport>, gateway_pairs: Vec<PairReport>) -> Document {
        Document {
            format_version: JSON_FORMAT_VERSION,
            llmprobe_version: env!("CARGO_PKG_VERSION").to_string(),
            partial: false,
            targets,
            gateway_pairs,
        }
    }

    /// The document as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Reads a document written by [`Document::to_json`]; the error names
    /// the place in the document that could not be read.
    pub fn read(text: &str) -> Result<Document, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        let doc: Document =
            serde_path_to_error::deserialize(&mut de).map_err(|e| match e.path().to_string() {
                p if p == "." => e.inner().to_string(),
                p => format!("{p}: {}", e.inner()),
            })?;
        if doc.format_version != JSON_FORMAT_VERSION {
            return Err(format!(
                "format_version {} is not {JSON_FORMAT_VERSION}, the version this llmprobe reads",
                doc.format_version
            ));
        }
        Ok(doc)
    }
}

/// The reports and the gateway pairs' measurements as one JSON document.
pub fn json_with_pairs(reports: &[SweepReport], pairs: &[PairReport]) -> String {
    Document::new(reports.to_vec(), pairs.to_vec()).to_json()
}

/// The reports as one JSON document (no gateway pairs).
pub fn json(reports: &[SweepReport]) -> String {
    json_with_pairs(reports, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_is_written_and_read_back_and_absent_reads_as_whole() {
        let mut doc = Document::new(vec![], vec![]);
        assert!(doc.to_json().contains("\"partial\": false"));
        doc.partial = true;
        assert!(Document::read(&doc.to_json()).unwrap().partial);
        // A document written before the field.
        let old = r#"{"format_version": 1, "llmprobe_version": "0.1.0", "targets": []}"#;
        assert!(!Document::read(old).unwrap().partial);
    }
}
