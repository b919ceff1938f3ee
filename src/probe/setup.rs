//! Setup discovery: what a server tells about itself (model ids, server kind
//! and version), probed once per sweep with a short time limit each, and no
//! failure when a server tells nothing.
//!
//! | server | endpoint | what it tells |
//! |---|---|---|
//! | any OpenAI-compatible | `GET {base_url}/models` | served model ids |
//! | vLLM (and llmprobe's simulator) | `GET /version` | `{"version": ...}` |
//! | TGI | `GET /info` | `model_id`, `version` |
//! | llama.cpp server | `GET /props` | `default_generation_settings`, `build_info` |
//! | Ollama | `GET /api/version` | `{"version": ...}` |
//! | any | `server` response header | product/version (uvicorn, llama.cpp, ...) |

use std::time::Duration;

use serde_json::Value;

use crate::config::redact::redact;
use crate::config::secret::Secret;
use crate::probe::client::Client;

/// Time limit of each discovery request.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

// The answer is part of the sweep's report, so its type lives with the reports.
pub use crate::stats::report::Setup;

async fn get_json(
    client: &Client,
    url: &str,
    key: Option<&Secret>,
) -> (Option<Value>, Option<String>) {
    match client.get(url, key, PROBE_TIMEOUT).await {
        Ok(resp) => {
            let server = resp.server.clone();
            if resp.status != 200 {
                return (None, server);
            }
            let text = resp.text_prefix(256 * 1024).await;
            (serde_json::from_str(&text).ok(), server)
        }
        Err(_) => (None, None),
    }
}

/// The server's root: the base URL without its trailing `/v1`.
fn root_of(base_url: &str) -> &str {
    base_url.strip_suffix("/v1").unwrap_or(base_url)
}

/// Asks the server at `base_url` what it is. Never fails; unknown stays "".
pub async fn discover(client: &Client, base_url: &str, key: Option<&Secret>, model: &str) -> Setup {
    let root = root_of(base_url);
    let urls = [
        format!("{base_url}/models"),
        format!("{root}/version"),
        format!("{root}/info"),
        format!("{root}/props"),
        format!("{root}/api/version"),
    ];
    let (models, version, info, props, ollama) = tokio::join!(
        get_json(client, &urls[0], key),
        get_json(client, &urls[1], key),
        get_json(client, &urls[2], key),
        get_json(client, &urls[3], key),
        get_json(client, &urls[4], key),
    );
    let header = [&models.1, &version.1, &info.1, &props.1, &ollama.1]
        .into_iter()
        .find_map(|h| h.clone());
    let mut setup = identify(
        version.0.as_ref(),
        info.0.as_ref(),
        props.0.as_ref(),
        ollama.0.as_ref(),
        header.as_deref(),
    );
    if let Some(list) = models
        .0
        .as_ref()
        .and_then(|v| v.get("data"))
        .and_then(Value::as_array)
    {
        setup.models = list
            .iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .take(100)
            .map(|id| redact(id).into_owned())
            .collect();
        setup.model_listed = Some(setup.models.iter().any(|m| m == model));
    }
    setup
}

/// A string the server sent, without any secret (a server may echo the
/// Authorization header), then cut: redacting after the cut could show part
/// of a key.
fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(|s| cut(&redact(s)))
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Decides the server kind and version from what each endpoint answered.
pub fn identify(
    version: Option<&Value>,
    info: Option<&Value>,
    props: Option<&Value>,
    ollama: Option<&Value>,
    server_header: Option<&str>,
) -> Setup {
    let server_header = server_header.map(redact);
    let (product, header_version) = match server_header.as_deref() {
        Some(h) => {
            let first = h.split_whitespace().next().unwrap_or("");
            match first.split_once('/') {
                Some((p, v)) => (p.to_string(), v.to_string()),
                None => (first.to_string(), String::new()),
            }
        }
        None => (String::new(), String::new()),
    };
    let (server, server_version) = if let Some(v) = text(ollama.and_then(|o| o.get("version"))) {
        ("ollama".to_string(), v)
    } else if let (Some(_), Some(v)) = (
        info.and_then(|i| i.get("model_id")),
        text(info.and_then(|i| i.get("version"))),
    ) {
        ("tgi".to_string(), v)
    } else if props.is_some_and(|p| p.get("default_generation_settings").is_some()) {
        let v = text(props.and_then(|p| p.get("build_info"))).unwrap_or_default();
        ("llama.cpp".to_string(), v)
    } else if let Some(v) = text(version.and_then(|o| o.get("version"))) {
        // vLLM answers `{"version": ...}`; a server that names itself wins.
        let kind = text(version.and_then(|o| o.get("server"))).unwrap_or_else(|| {
            if product.is_empty() || product == "uvicorn" {
                "vllm".to_string()
            } else {
                product.clone()
            }
        });
        (kind, v)
    } else {
        (cut(&product), cut(&header_version))
    };
    Setup {
        server,
        server_version,
        ..Setup::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_is_recognised() {
        let s = identify(
            Some(&json!({"version": "0.6.3"})),
            None,
            None,
            None,
            Some("uvicorn"),
        );
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("vllm", "0.6.3")
        );
        let s = identify(
            None,
            Some(&json!({"model_id": "m", "version": "2.4.0"})),
            None,
            None,
            None,
        );
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("tgi", "2.4.0")
        );
        let props = json!({"default_generation_settings": {}, "build_info": "b4567-abc"});
        let s = identify(None, None, Some(&props), None, Some("llama.cpp"));
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("llama.cpp", "b4567-abc")
        );
        let s = identify(None, None, None, Some(&json!({"version": "0.5.7"})), None);
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("ollama", "0.5.7")
        );
        let s = identify(
            Some(&json!({"server": "llmprobe-sim", "version": "0.1.0"})),
            None,
            None,
            None,
            None,
        );
        assert_eq!(s.server, "llmprobe-sim");
        let s = identify(None, None, None, None, Some("nginx/1.22.1 (Debian)"));
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("nginx", "1.22.1")
        );
        assert_eq!(identify(None, None, None, None, None), Setup::default());
    }

    #[test]
    fn what_a_server_echoes_of_the_key_is_redacted_before_the_cut() {
        let key = Secret::new("sk-SETUP-ECHO-0123456789abcdef".into());
        let echoed = format!("Bearer {}", key.expose());
        // 57 characters before the key: a cut at 64 before redacting would
        // show its first 7 characters.
        let long = format!("{}{}", "v".repeat(50), echoed);
        let escaped: String = echoed
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let json: Value = serde_json::from_str(&format!(r#"{{"version": "{escaped}"}}"#)).unwrap();
        let s = identify(Some(&json), None, None, None, None);
        assert_eq!(s.server_version, "Bearer [redacted]");
        let s = identify(Some(&json!({"version": long})), None, None, None, None);
        assert_eq!(
            s.server_version,
            format!("{}Bearer [redact", "v".repeat(50))
        );
        let header = format!("{}/1.0", key.expose());
        let s = identify(None, None, None, None, Some(&header));
        assert_eq!(
            (s.server.as_str(), s.server_version.as_str()),
            ("[redacted]", "1.0")
        );
    }

    #[test]
    fn root_strips_v1() {
        assert_eq!(root_of("http://h:8000/v1"), "http://h:8000");
        assert_eq!(root_of("http://h:8000/api"), "http://h:8000/api");
    }
}
