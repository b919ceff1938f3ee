//! Which proxy, if any, a request to a URL goes through. Proxies are used
//! only when asked: a target's `proxy: environment` (or the same in
//! `defaults:`) lets the environment's `HTTPS_PROXY`, `HTTP_PROXY` and
//! `ALL_PROXY` apply, with `NO_PROXY`; without it they are ignored (a
//! variable set for other programs must not send a key through a proxy in
//! clear, nor turn a dead proxy into "the server cannot be reached"). A
//! loopback host is never proxied, and the built-in engine is never either
//! (the client decides that: see `probe/tls.rs`). Plain data and pure
//! matching: the client, `check-config` and `sweep` ask the same question.

use std::net::IpAddr;

use serde::Deserialize;

use super::secret::Secret;

/// Whether a target's requests may go through a proxy (`proxy:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyMode {
    /// Never: proxy variables in the environment are ignored.
    #[default]
    Off,
    /// The environment's proxy variables apply (`NO_PROXY` respected,
    /// loopback never proxied).
    Environment,
}

impl ProxyMode {
    /// The name used in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyMode::Off => "off",
            ProxyMode::Environment => "environment",
        }
    }
}

/// One proxy variable as read: its name and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Variable {
    name: &'static str,
    value: String,
}

/// The proxy variables of the environment, read once (at start and at each
/// reload, when the clients are built).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyVariables {
    https: Option<Variable>,
    http: Option<Variable>,
    all: Option<Variable>,
    no_proxy: Vec<String>,
    /// The proxies' passwords, held as secrets while these variables are
    /// in use: redaction then removes them from any text, as it does keys.
    passwords: Vec<Secret>,
}

/// Where a request goes through: the proxy's URL (for the client) and how
/// to show it (no credentials), with the variable it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRoute {
    /// The proxy's URL as configured (credentials included, for the client).
    pub url: String,
    /// `scheme://host:port (VARIABLE)`: what `check-config`, `sweep` and
    /// error messages show.
    pub shown: String,
}

impl ProxyVariables {
    /// The variables of this process's environment (lower-case names first,
    /// as curl reads them, then upper-case).
    pub fn from_env() -> ProxyVariables {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The variables as `lookup` gives them (tests pass their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> ProxyVariables {
        let read = |names: [&'static str; 2]| {
            names.into_iter().find_map(|name| {
                let value = lookup(name)?.trim().to_string();
                (!value.is_empty()).then_some(Variable { name, value })
            })
        };
        let no_proxy = read(["no_proxy", "NO_PROXY"])
            .map(|v| {
                v.value
                    .split(',')
                    .map(|e| e.trim().to_ascii_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let (https, http, all) = (
            read(["https_proxy", "HTTPS_PROXY"]),
            read(["http_proxy", "HTTP_PROXY"]),
            read(["all_proxy", "ALL_PROXY"]),
        );
        let passwords = [&https, &http, &all]
            .into_iter()
            .flatten()
            .filter_map(|v| password(&v.value))
            .map(Secret::new)
            .collect();
        ProxyVariables {
            https,
            http,
            all,
            no_proxy,
            passwords,
        }
    }

    /// Whether any proxy variable is set (else no proxied client is needed).
    pub fn any(&self) -> bool {
        self.https.is_some() || self.http.is_some() || self.all.is_some()
    }

    /// The proxy a request to `url` goes through under `mode`; None: direct.
    pub fn route(&self, mode: ProxyMode, url: &str) -> Option<ProxyRoute> {
        if mode == ProxyMode::Off {
            return None;
        }
        let target = url::Url::parse(url).ok()?;
        let host = target
            .host_str()?
            .trim_matches(['[', ']'])
            .to_ascii_lowercase();
        if is_loopback(&host) || self.excluded(&host) {
            return None;
        }
        let by_scheme = match target.scheme() {
            "https" => self.https.as_ref(),
            _ => self.http.as_ref(),
        };
        let var = by_scheme.or(self.all.as_ref())?;
        let with_scheme = if var.value.contains("://") {
            var.value.clone()
        } else {
            format!("http://{}", var.value)
        };
        let parsed = url::Url::parse(&with_scheme).ok()?;
        let shown = match (parsed.host_str(), parsed.port_or_known_default()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p} ({})", parsed.scheme(), var.name),
            (Some(h), None) => format!("{}://{h} ({})", parsed.scheme(), var.name),
            _ => format!("an unreadable proxy URL ({})", var.name),
        };
        Some(ProxyRoute {
            url: with_scheme,
            shown,
        })
    }

    /// Whether `NO_PROXY` sends `host` direct: `*`, the host itself, a
    /// domain it is in (`example.com` and `.example.com` alike), an address
    /// or a network (`10.0.0.0/8`); a `:port` on an entry is ignored.
    fn excluded(&self, host: &str) -> bool {
        let ip: Option<IpAddr> = host.parse().ok();
        self.no_proxy.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            if let (Some(ip), Ok(net)) = (ip, entry.parse::<ipnet_lite::Net>()) {
                return net.contains(ip);
            }
            let entry = match entry.rsplit_once(':') {
                Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
                _ => entry.as_str(),
            };
            let domain = entry.trim_start_matches('.');
            !domain.is_empty()
                && (host == domain
                    || host
                        .strip_suffix(domain)
                        .is_some_and(|rest| rest.ends_with('.')))
        })
    }
}

/// The password in a proxy URL (`http://user:PASSWORD@host:port`), as
/// written and percent-decoded, if any.
fn password(value: &str) -> Option<String> {
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let url = url::Url::parse(&with_scheme).ok()?;
    let written = url.password().filter(|p| !p.is_empty())?;
    Some(percent_decode(written).unwrap_or_else(|| written.to_string()))
}

/// `%XX` sequences decoded; None when the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Whether `host` is this machine: `localhost` (and names under it), or a
/// loopback address.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An address or a network in `NO_PROXY` (`10.1.2.3`, `10.0.0.0/8`, `::1/128`).
mod ipnet_lite {
    use std::net::IpAddr;
    use std::str::FromStr;

    /// An address with a prefix length.
    pub struct Net {
        addr: IpAddr,
        prefix: u32,
    }

    impl FromStr for Net {
        type Err = ();
        fn from_str(s: &str) -> Result<Net, ()> {
            let (addr, prefix) = match s.split_once('/') {
                Some((a, p)) => (a, Some(p.parse::<u32>().map_err(|_| ())?)),
                None => (s, None),
            };
            let addr: IpAddr = addr.trim_matches(['[', ']']).parse().map_err(|_| ())?;
            let bits = if addr.is_ipv4() { 32 } else { 128 };
            let prefix = prefix.unwrap_or(bits);
            (prefix <= bits).then_some(Net { addr, prefix }).ok_or(())
        }
    }

    impl Net {
        /// Whether `ip` is in this network.
        pub fn contains(&self, ip: IpAddr) -> bool {
            let masked = |bits: u128, width: u32| {
                let shift = width - self.prefix;
                if shift >= 128 {
                    0
                } else {
                    bits >> shift
                }
            };
            match (self.addr, ip) {
                (IpAddr::V4(n), IpAddr::V4(a)) => {
                    masked(u32::from(n).into(), 32) == masked(u32::from(a).into(), 32)
                }
                (IpAddr::V6(n), IpAddr::V6(a)) => {
                    masked(u128::from(n), 128) == masked(u128::from(a), 128)
                }
                _ => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> ProxyVariables {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxyVariables::from_lookup(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    fn shown(v: &ProxyVariables, url: &str) -> Option<String> {
        v.route(ProxyMode::Environment, url).map(|r| r.shown)
    }

    #[test]
    fn off_ignores_every_variable() {
        let v = vars(&[
            ("HTTPS_PROXY", "http://p:3128"),
            ("ALL_PROXY", "socks5://s:1080"),
        ]);
        assert_eq!(v.route(ProxyMode::Off, "https://api.example.com/v1"), None);
    }

    #[test]
    fn the_variable_of_the_scheme_then_all_proxy() {
        let v = vars(&[
            ("HTTPS_PROXY", "http://user:pw@p:3128"),
            ("ALL_PROXY", "q:8080"),
        ]);
        assert_eq!(
            shown(&v, "https://api.example.com/v1").as_deref(),
            Some("http://p:3128 (HTTPS_PROXY)")
        );
        assert_eq!(
            v.route(ProxyMode::Environment, "https://api.example.com/v1")
                .map(|r| r.url)
                .as_deref(),
            Some("http://user:pw@p:3128")
        );
        assert_eq!(
            shown(&v, "http://10.0.0.5:8000/v1").as_deref(),
            Some("http://q:8080 (ALL_PROXY)")
        );
        let lower = vars(&[
            ("http_proxy", "http://low:1"),
            ("HTTP_PROXY", "http://up:2"),
        ]);
        assert_eq!(
            shown(&lower, "http://h/v1").as_deref(),
            Some("http://low:1 (http_proxy)")
        );
    }

    #[test]
    fn loopback_and_no_proxy_go_direct() {
        let v = vars(&[
            ("ALL_PROXY", "http://p:3128"),
            (
                "NO_PROXY",
                "internal.example, .corp.test:443, 10.0.0.0/8, 192.168.1.7",
            ),
        ]);
        for url in [
            "http://127.0.0.1:8000/v1",
            "http://127.3.4.5/v1",
            "http://[::1]:8000/v1",
            "http://localhost:8000/v1",
            "http://api.localhost/v1",
            "http://internal.example/v1",
            "http://gpu.internal.example/v1",
            "https://corp.test/v1",
            "https://a.corp.test/v1",
            "http://10.20.30.40:8000/v1",
            "http://192.168.1.7/v1",
        ] {
            assert_eq!(shown(&v, url), None, "{url}");
        }
        for url in [
            "http://notinternal.example/v1",
            "http://192.168.1.8/v1",
            "http://11.0.0.1/v1",
            "https://api.example.com/v1",
        ] {
            assert!(shown(&v, url).is_some(), "{url}");
        }
        let all = vars(&[("HTTP_PROXY", "http://p:1"), ("no_proxy", "*")]);
        assert_eq!(shown(&all, "http://h/v1"), None);
    }

    #[test]
    fn no_variable_no_proxy() {
        let v = vars(&[("HTTPS_PROXY", "  ")]);
        assert!(!v.any());
        assert_eq!(shown(&v, "https://h/v1"), None);
    }

    #[test]
    fn a_proxy_password_is_redacted_like_a_key() {
        let v = vars(&[("HTTPS_PROXY", "http://me:pr%40xy-PW-77q@p:3128")]);
        assert_eq!(
            crate::config::redact::redact("auth pr@xy-PW-77q failed"),
            "auth [redacted] failed"
        );
        assert_eq!(
            shown(&v, "https://h/v1").as_deref(),
            Some("http://p:3128 (HTTPS_PROXY)")
        );
        drop(v);
    }
}
