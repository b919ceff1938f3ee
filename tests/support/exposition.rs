//! Reading values out of a Prometheus text exposition (/metrics).

/// The lines of series `name` that hold every `labels` pair (`key="value"`).
fn series<'a>(
    text: &'a str,
    name: &'a str,
    labels: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a str> + 'a {
    let (with_labels, without) = (format!("{name}{{"), format!("{name} "));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(move |l| l.starts_with(&with_labels) || l.starts_with(&without))
        .filter(move |l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
}

fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next().and_then(|v| v.parse().ok())
}

/// The value of the first series named `name` that holds every `labels`
/// pair, or None.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series(text, name, labels).next().and_then(value)
}

/// The sum over every series named `name` that holds every `labels` pair
/// (0 when there is none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    series(text, name, labels).filter_map(value).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x_total X.\n# TYPE x_total counter\n\
        x_total{target=\"a\",outcome=\"ok\"} 3\n\
        x_total{target=\"a\",outcome=\"shed\"} 2\n\
        x_total{target=\"b\",outcome=\"ok\"} 5\n\
        x_total_more{target=\"a\"} 100\n\
        up 1\n";

    #[test]
    fn series_are_found_by_name_and_labels() {
        assert_eq!(metric(TEXT, "x_total", &[("outcome", "shed")]), Some(2.0));
        assert_eq!(metric(TEXT, "up", &[]), Some(1.0));
        assert_eq!(metric(TEXT, "x_total", &[("target", "c")]), None);
        assert_eq!(metric_sum(TEXT, "x_total", &[("target", "a")]), 5.0);
        assert_eq!(metric_sum(TEXT, "x_total", &[("outcome", "ok")]), 8.0);
    }
}
