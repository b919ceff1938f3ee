//! One sweep in-process, as `llmprobe sweep` runs it.

use llmprobe::stats::report::SweepReport;

use super::config;

/// Sweeps the one target of `yaml` once and returns its report.
pub async fn sweep_one(yaml: &str) -> SweepReport {
    let cfg = config::load(yaml);
    let mut reports = llmprobe::schedule::once::sweep(
        &cfg,
        &[],
        std::sync::Arc::new(llmprobe::sweep::NoObserver),
    )
    .await
    .unwrap();
    assert_eq!(reports.len(), 1, "one target, one report");
    reports.remove(0)
}
