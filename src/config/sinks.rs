//! `sinks:`: each export sink's own settings, one section per sink that has
//! any. A reload rebuilds a sink only when its own section changed, so each
//! section is compared apart (`PartialEq`). `sinks.log` is used as written;
//! `sinks.otlp` names secrets (its headers), so it has a resolve stage,
//! [`resolve_sinks`], which reads them and checks every value.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::checks::MAX_INTERVAL;
use super::defaults;
use super::env::{read_key_file, Env};
use super::secret::Secret;

/// `sinks:` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SinksFile {
    /// `sinks.log`: the log lines of finished rounds.
    pub log: LogSink,
    /// `sinks.otlp`: OpenTelemetry metrics pushed to a collector (off when absent).
    pub otlp: Option<OtlpFile>,
}

/// `sinks:` resolved: the settings of every configurable export sink.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SinkSettings {
    /// `sinks.log`: the log lines of finished rounds.
    pub log: LogSink,
    /// `sinks.otlp`, resolved; None: the OTLP sink is off.
    pub otlp: Option<OtlpSink>,
}

/// `sinks.log` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSink {
    /// Whether a line is logged per finished sweep or pair measurement.
    pub rounds: bool,
}

impl Default for LogSink {
    fn default() -> Self {
        LogSink {
            rounds: defaults::LOG_ROUNDS,
        }
    }
}

/// `sinks.otlp` as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpFile {
    /// The collector's OTLP/HTTP metrics URL.
    pub endpoint: String,
    /// The OTLP transport; only `http/protobuf` is built.
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// Between two exports.
    #[serde(default = "default_otlp_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// Limit on one export request.
    #[serde(default = "default_otlp_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Cumulative (the default) or delta histograms.
    #[serde(default)]
    pub temporality: Temporality,
    /// Headers sent with every export, by name.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderFile>,
}

fn default_protocol() -> String {
    defaults::OTLP_PROTOCOL.into()
}

fn default_otlp_interval() -> Duration {
    defaults::OTLP_INTERVAL
}

fn default_otlp_timeout() -> Duration {
    defaults::OTLP_TIMEOUT
}

/// How histogram points count: OTLP's aggregation temporality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Temporality {
    /// Every point counts from the sink's start.
    #[default]
    Cumulative,
    /// Every point counts since the previous export.
    Delta,
}

impl Temporality {
    /// As written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Temporality::Cumulative => "cumulative",
            Temporality::Delta => "delta",
        }
    }
}

impl<'de> Deserialize<'de> for Temporality {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // By hand: the config crate words a derived enum's error poorly.
        match String::deserialize(d)?.as_str() {
            "cumulative" => Ok(Temporality::Cumulative),
            "delta" => Ok(Temporality::Delta),
            other => Err(serde::de::Error::custom(format!(
                "`{other}` is not a temporality: use `cumulative` or `delta`"
            ))),
        }
    }
}

/// A header's value as written: the value itself, or where its secret is.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderFile {
    /// Written in the file (not a secret).
    Plain(String),
    /// Read from the environment or a file (a secret).
    From(HeaderFrom),
}

/// `{ env: NAME }` or `{ file: PATH }`, with an optional `prefix`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderFrom {
    /// The environment variable holding the value.
    pub env: Option<String>,
    /// The file holding the value (`${CREDENTIALS_DIRECTORY}` expanded).
    pub file: Option<String>,
    /// Written before the secret (`"Bearer "`); not a secret itself.
    #[serde(default)]
    pub prefix: String,
}

impl<'de> Deserialize<'de> for HeaderFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = HeaderFile;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a value, `{ env: NAME }` or `{ file: PATH }`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<HeaderFile, E> {
                Ok(HeaderFile::Plain(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<HeaderFile, E> {
                Ok(HeaderFile::Plain(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<HeaderFile, E> {
                Ok(HeaderFile::Plain(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<HeaderFile, E> {
                Ok(HeaderFile::Plain(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<HeaderFile, A::Error> {
                let from =
                    HeaderFrom::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(HeaderFile::From(from))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `sinks.otlp` resolved: the URL checked, the secrets read.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSink {
    /// Where export requests are POSTed.
    pub endpoint: String,
    /// Between two exports.
    pub interval: Duration,
    /// Limit on one export request.
    pub timeout: Duration,
    /// Cumulative or delta histograms.
    pub temporality: Temporality,
    /// Headers sent with every export, in name order.
    pub headers: Vec<(String, HeaderValue)>,
}

/// A header's value, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    /// As written in the file.
    Plain(String),
    /// The prefix, then a secret (redacted wherever text leaves the process).
    Secret(String, Secret),
}

impl HeaderValue {
    /// The value sent; for the exporter's request only.
    pub fn expose(&self) -> String {
        match self {
            HeaderValue::Plain(v) => v.clone(),
            HeaderValue::Secret(prefix, s) => format!("{prefix}{}", s.expose()),
        }
    }
}

/// The shortest interval and timeout accepted (a typo for seconds: `1ms`).
const MIN_OTLP_PERIOD: Duration = Duration::from_millis(100);

/// Headers the exporter sets itself.
const RESERVED_HEADERS: [&str; 5] = [
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
];

/// Headers that carry credentials: never written in the file.
const CREDENTIAL_HEADERS: [&str; 2] = ["authorization", "proxy-authorization"];

/// Resolves `sinks:`: `sinks.otlp` checked and its secrets read, each
/// problem reported under its key.
pub fn resolve_sinks(
    file: &SinksFile,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> SinkSettings {
    SinkSettings {
        log: file.log.clone(),
        otlp: file.otlp.as_ref().and_then(|o| resolve_otlp(o, env, bad)),
    }
}

fn resolve_otlp(
    file: &OtlpFile,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Option<OtlpSink> {
    let mut ok = true;
    let mut fail = |key: &str, msg: String| {
        ok = false;
        bad(&format!("sinks.otlp.{key}"), msg);
    };
    let endpoint = check_endpoint(&file.endpoint).unwrap_or_else(|e| {
        fail("endpoint", e);
        String::new()
    });
    match file.protocol.as_str() {
        "http/protobuf" => {}
        "grpc" => fail(
            "protocol",
            "`grpc` is not supported: use `http/protobuf` (a collector's OTLP/HTTP port, 4318)"
                .into(),
        ),
        other => fail(
            "protocol",
            format!("`{other}` is not supported: use `http/protobuf`"),
        ),
    }
    for (key, value) in [("interval", file.interval), ("timeout", file.timeout)] {
        if value < MIN_OTLP_PERIOD {
            fail(key, "must be at least 100ms".into());
        } else if value > MAX_INTERVAL {
            fail(key, "must be at most 365days".into());
        }
    }
    let mut headers = Vec::new();
    for (name, value) in &file.headers {
        match resolve_header(name, value, env) {
            Ok(v) => headers.push((name.to_ascii_lowercase(), v)),
            Err(e) => fail(&format!("headers.{name}"), e),
        }
    }
    ok.then(|| OtlpSink {
        endpoint,
        interval: file.interval,
        timeout: file.timeout,
        temporality: file.temporality,
        headers,
    })
}

/// The endpoint as POSTed: http or https, no credentials or fragment; a
/// URL with no path gets the OTLP/HTTP metrics path, `/v1/metrics`.
fn check_endpoint(written: &str) -> Result<String, String> {
    let url = url::Url::parse(written).map_err(|e| format!("`{written}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{written}` must start with http:// or https://"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials in the URL would end up in logs.
        return Err("must not hold credentials: send them in `headers` (from env or file)".into());
    }
    if url.fragment().is_some() {
        return Err(format!("`{written}` must not have a #fragment"));
    }
    if url.path() == "/" && url.query().is_none() {
        return Ok(format!("{}v1/metrics", url.as_str()));
    }
    Ok(written.to_string())
}

/// A header checked and resolved; a message never quotes a secret.
fn resolve_header(name: &str, value: &HeaderFile, env: &dyn Env) -> Result<HeaderValue, String> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err("is not a valid header name".into());
    }
    if RESERVED_HEADERS.contains(&lower.as_str()) {
        return Err("is set by the exporter itself".into());
    }
    let resolved = match value {
        HeaderFile::Plain(v) if CREDENTIAL_HEADERS.contains(&lower.as_str()) => {
            let _ = v;
            return Err(
                "holds a credential: give it as `{ env: NAME }` or `{ file: PATH }`, not in the file"
                    .into(),
            );
        }
        HeaderFile::Plain(v) => {
            check_header_value(v).map_err(|e| format!("value {e}"))?;
            HeaderValue::Plain(v.clone())
        }
        HeaderFile::From(from) => {
            let secret = match (&from.env, &from.file) {
                (Some(var), None) => match env.var(var) {
                    Some(v) if !v.trim().is_empty() => v.trim().to_string(),
                    _ => return Err(format!("environment variable `{var}` is not set or empty")),
                },
                (None, Some(file)) => read_key_file(file, env)?,
                _ => return Err("set exactly one of `env` and `file`".into()),
            };
            check_header_value(&from.prefix).map_err(|e| format!("prefix {e}"))?;
            check_header_value(&secret).map_err(|e| format!("secret {e}"))?;
            HeaderValue::Secret(from.prefix.clone(), Secret::new(secret))
        }
    };
    Ok(resolved)
}

/// An HTTP token character (RFC 9110 `tchar`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Visible ASCII, spaces and tabs only: no line break can end the header.
fn check_header_value(v: &str) -> Result<(), String> {
    if v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
        Ok(())
    } else {
        Err("holds a character a header cannot carry (a line break, a control or non-ASCII character)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(&'static [(&'static str, &'static str)]);
    impl Env for Vars {
        fn var(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn otlp(endpoint: &str) -> OtlpFile {
        OtlpFile {
            endpoint: endpoint.into(),
            protocol: default_protocol(),
            interval: defaults::OTLP_INTERVAL,
            timeout: defaults::OTLP_TIMEOUT,
            temporality: Temporality::Cumulative,
            headers: BTreeMap::new(),
        }
    }

    fn resolve(file: OtlpFile, env: &dyn Env) -> (Option<OtlpSink>, Vec<String>) {
        let mut problems = Vec::new();
        let sinks = SinksFile {
            log: LogSink::default(),
            otlp: Some(file),
        };
        let out = resolve_sinks(&sinks, env, &mut |k, m| problems.push(format!("{k}: {m}")));
        (out.otlp, problems)
    }

    #[test]
    fn a_url_without_a_path_gets_the_metrics_path() {
        assert_eq!(
            check_endpoint("http://c:4318").unwrap(),
            "http://c:4318/v1/metrics"
        );
        assert_eq!(
            check_endpoint("https://c/otlp/v1/metrics").unwrap(),
            "https://c/otlp/v1/metrics"
        );
        assert!(check_endpoint("ftp://c/").is_err());
        assert!(check_endpoint("http://u:p@c/")
            .unwrap_err()
            .contains("credentials"));
    }

    #[test]
    fn grpc_is_refused_naming_the_key() {
        let mut file = otlp("http://c:4318");
        file.protocol = "grpc".into();
        let (sink, problems) = resolve(file, &Vars(&[]));
        assert!(sink.is_none());
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with("sinks.otlp.protocol: `grpc` is not supported"),
            "{problems:?}"
        );
    }

    #[test]
    fn secrets_come_from_the_environment_and_are_never_quoted() {
        let mut file = otlp("http://c:4318");
        file.headers.insert(
            "Authorization".into(),
            HeaderFile::From(HeaderFrom {
                env: Some("TOKEN".into()),
                file: None,
                prefix: "Bearer ".into(),
            }),
        );
        file.headers
            .insert("x-scope-orgid".into(), HeaderFile::Plain("team-a".into()));
        let (sink, problems) = resolve(file.clone(), &Vars(&[("TOKEN", "s3cr3t-tok")]));
        assert!(problems.is_empty(), "{problems:?}");
        let sink = sink.unwrap();
        assert_eq!(sink.headers[0].0, "authorization");
        assert_eq!(sink.headers[0].1.expose(), "Bearer s3cr3t-tok");
        assert!(!format!("{sink:?}").contains("s3cr3t-tok"));
        assert_eq!(sink.headers[1].1.expose(), "team-a");

        // Unset, and a value that would end the header: named, not quoted.
        let (_, problems) = resolve(file.clone(), &Vars(&[]));
        assert_eq!(problems, ["sinks.otlp.headers.Authorization: environment variable `TOKEN` is not set or empty"]);
        let (_, problems) = resolve(file, &Vars(&[("TOKEN", "a\r\nX-Evil: 1")]));
        assert_eq!(problems.len(), 1);
        assert!(!problems[0].contains("Evil"), "{problems:?}");
    }

    #[test]
    fn a_secret_is_read_from_a_file_trimmed() {
        let path = std::env::temp_dir().join(format!("llmprobe-otlp-{}", std::process::id()));
        std::fs::write(&path, "file-s3cret\n").unwrap();
        let mut file = otlp("http://c:4318");
        let from = HeaderFrom {
            env: None,
            file: Some(path.display().to_string()),
            prefix: String::new(),
        };
        file.headers
            .insert("api-key".into(), HeaderFile::From(from));
        let (sink, problems) = resolve(file, &Vars(&[]));
        std::fs::remove_file(&path).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let (name, value) = &sink.unwrap().headers[0];
        assert_eq!(
            (name.as_str(), value.expose()),
            ("api-key", "file-s3cret".into())
        );
        assert!(matches!(value, HeaderValue::Secret(..)));
    }

    #[test]
    fn a_credential_written_in_the_file_is_refused() {
        let mut file = otlp("http://c:4318");
        file.headers
            .insert("authorization".into(), HeaderFile::Plain("Bearer x".into()));
        file.headers.insert(
            "content-type".into(),
            HeaderFile::Plain("text/plain".into()),
        );
        file.headers
            .insert("bad name".into(), HeaderFile::Plain("v".into()));
        let (sink, problems) = resolve(file, &Vars(&[]));
        assert!(sink.is_none());
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems.iter().all(|p| !p.contains("Bearer x")));
    }

    #[test]
    fn periods_are_bounded() {
        let mut file = otlp("http://c:4318");
        file.interval = Duration::from_millis(1);
        let (_, problems) = resolve(file, &Vars(&[]));
        assert_eq!(problems, ["sinks.otlp.interval: must be at least 100ms"]);
    }
}
