//! Label names: Prometheus's syntax, and the labels of
//! `llmprobe_target_info`, listed once for the metrics and the template.

/// Labels of `llmprobe_target_info`, in order: the target and its model,
/// what the server tells about itself, then what only configuration can
/// tell ([`DECLARED_LABELS`]). Every target has them all, empty when
/// unknown; its other configured labels follow.
pub const TARGET_INFO_LABELS: &[&str] = &[
    "target",
    "model",
    "server",
    "server_version",
    "gpu",
    "driver",
    "gpu_memory",
    "os",
    "via_gateway",
];

/// The standard labels a configuration (or a discovery file) declares,
/// since llmprobe cannot learn them from the server: gpu, driver,
/// gpu_memory, os, via_gateway.
pub const DECLARED_LABELS: &[&str] = TARGET_INFO_LABELS.split_at(4).1;

/// Whether `s` is a Prometheus label name, `[a-zA-Z_][a-zA-Z0-9_]*` (the
/// `__` prefix, which file_sd writers use for values that are not meant to
/// be labels, included).
pub fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a configured label can go into `llmprobe_target_info`: a label
/// name, not reserved (`__`), and neither `target` nor `model`, which
/// llmprobe sets itself.
pub fn is_usable_label(s: &str) -> bool {
    is_label_name(s) && !s.starts_with("__") && s != "target" && s != "model"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_labels_are_the_machine_part_of_target_info() {
        assert_eq!(
            DECLARED_LABELS,
            ["gpu", "driver", "gpu_memory", "os", "via_gateway"]
        );
    }

    #[test]
    fn label_names() {
        for ok in ["gpu", "_x", "a1", "__meta_x", "A_b"] {
            assert!(is_label_name(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a b", "é"] {
            assert!(!is_label_name(bad), "{bad}");
        }
        assert!(is_usable_label("gpu"));
        for reserved in ["__x", "target", "model", "a-b"] {
            assert!(!is_usable_label(reserved), "{reserved}");
        }
    }
}
