//! The template: how an entry of a discovery file (`host:port` and its
//! labels) becomes a target as if written under `targets:`, to be resolved
//! like one.

use std::collections::BTreeMap;

use super::defaults;
use super::file::{IdleGateFile, MetricsUrl, TargetFile, TemplateFile};
use super::keys::Settings;

/// Checks a `host:port` from a discovery file: no scheme, path, credentials
/// or spaces (those belong in the template, or nowhere).
fn check_address(address: &str) -> Result<(), String> {
    if address.is_empty() {
        return Err("empty address".into());
    }
    if address.contains("://") {
        return Err("must be `host:port`, without a scheme (set `target_template.scheme`)".into());
    }
    if address.contains(['/', '?', '#']) {
        return Err(
            "must be `host:port`, without a path (set `target_template.path_prefix`)".into(),
        );
    }
    if address.contains('@') {
        return Err("must not hold credentials".into());
    }
    if address.contains(char::is_whitespace) || address.contains(char::is_control) {
        return Err("must not contain spaces".into());
    }
    Ok(())
}

/// The target an entry describes, as if written under `targets:`.
pub fn target_file(
    t: &TemplateFile,
    address: &str,
    labels: &BTreeMap<String, String>,
) -> Result<TargetFile, String> {
    check_address(address)?;
    let scheme = t.scheme();
    let prefix = t.path_prefix();
    let name = t
        .name_label
        .as_ref()
        .and_then(|l| labels.get(l))
        .filter(|n| !n.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| address.to_string());
    super::checks::check_name(&name)
        .map_err(|e| format!("target name `{}` {e}", super::checks::shown_name(&name)))?;
    let model = labels
        .get(t.model_label())
        .filter(|m| !m.trim().is_empty())
        .or(t.model.as_ref())
        .cloned();
    let target_labels = t
        .copied_labels()
        .into_iter()
        .filter_map(|l| labels.get(l).map(|v| (l.to_string(), v.clone())))
        .collect();
    let max_concurrency =
        match t
            .max_concurrency_label
            .as_ref()
            .and_then(|l| labels.get(l).map(|v| (l, v)))
        {
            Some((l, v)) => Some(v.trim().parse::<u32>().map_err(|_| {
                format!("label `{l}` (max_concurrency) is `{v}`, not a whole number")
            })?),
            None => t.settings.max_concurrency,
        };
    let idle_gate = t.idle_gate.as_ref().map(|g| IdleGateFile {
        at: MetricsUrl(format!(
            "{scheme}://{address}{}",
            g.at.0.as_deref().unwrap_or(defaults::TEMPLATE_METRICS_PATH)
        )),
        metric: g.metric.clone(),
        max_value: g.max_value,
        retry_every: g.retry_every,
    });
    Ok(TargetFile {
        name,
        base_url: Some(format!("{scheme}://{address}{prefix}")),
        simulator: None,
        model,
        api_key_env: t.api_key_env.clone(),
        api_key_file: t.api_key_file.clone(),
        labels: target_labels,
        workloads: t.workloads.clone(),
        idle_gate,
        settings: Settings {
            max_concurrency,
            ..t.settings.clone()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(json: &str) -> TemplateFile {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn template_builds_the_target_file() {
        let t = template(
            r#"{"scheme": "https", "path_prefix": "/openai/v1", "name_label": "name", "labels": ["gpu"], "max_concurrency_label": "max_in_flight"}"#,
        );
        let labels: BTreeMap<String, String> = [
            ("name", "worker-7"),
            ("model", "qwen"),
            ("gpu", "H100"),
            ("rack", "r1"),
            ("max_in_flight", "12"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let tf = target_file(&t, "10.0.0.7:8443", &labels).unwrap();
        assert_eq!(tf.name, "worker-7");
        assert_eq!(
            tf.base_url.as_deref(),
            Some("https://10.0.0.7:8443/openai/v1")
        );
        assert_eq!(tf.model.as_deref(), Some("qwen"));
        assert_eq!(tf.labels.len(), 1, "only the listed labels are copied");
        assert_eq!(tf.settings.max_concurrency, Some(12));

        let plain = TemplateFile {
            model: Some("fallback".into()),
            ..Default::default()
        };
        let tf = target_file(&plain, "h:1", &BTreeMap::new()).unwrap();
        assert_eq!(tf.name, "h:1", "the address names the target by default");
        assert_eq!(tf.base_url.as_deref(), Some("http://h:1/v1"));
        assert_eq!(tf.model.as_deref(), Some("fallback"));

        for bad in ["", "http://h:1", "h:1/v1", "u:p@h:1", "h :1"] {
            assert!(target_file(&plain, bad, &BTreeMap::new()).is_err(), "{bad}");
        }
        let mut l = labels.clone();
        l.insert("max_in_flight".into(), "lots".into());
        assert!(target_file(&t, "h:1", &l)
            .unwrap_err()
            .contains("not a whole number"));
    }

    #[test]
    fn a_discovered_name_with_a_control_character_is_refused() {
        let t = template(r#"{"name_label": "name", "model": "m"}"#);
        for (name, code) in [
            ("w\u{1b}[2J", "001B"),
            ("a\u{0}", "0000"),
            ("x\u{202e}y", "202E"),
        ] {
            let labels: BTreeMap<String, String> = [("name".to_string(), name.to_string())].into();
            let err = target_file(&t, "h:1", &labels).unwrap_err();
            assert!(err.contains(&format!("character U+{code}")), "{err}");
            assert!(!err.chars().any(char::is_control), "{err:?}");
        }
    }
}
