//! The Kubernetes manifests of `deploy/kubernetes/`, offline:
//!
//! - `validate.sh`: every core manifest against the Kubernetes OpenAPI
//!   schemas (the `kubernetes-validate` Python package, installed by the
//!   script when missing; the test fails when it cannot run);
//! - the generated manifests (PrometheusRule, dashboards ConfigMap) equal
//!   what `generate.sh` makes of `prometheus/alerts.yml`,
//!   `deploy/prometheus/recording.yml` and `grafana/dashboards/*.json`, so
//!   they cannot drift;
//! - the Prometheus Operator resources, which have no schema there, checked
//!   for structure: the PrometheusRule carries exactly the shipped groups,
//!   the ServiceMonitor selects the Service, which selects the pods;
//! - the StatefulSet's hardening and sharding, and the ConfigMap's config
//!   accepted by `llmprobe check-config` as each pod would see it.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::binary::llmprobe;
use support::paths::{read, repo, ScratchDir};
use support::process::{assert_success, output_text};
use yaml_rust2::{Yaml, YamlLoader};

fn yaml(rel: &str) -> Yaml {
    let mut docs = YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document expected");
    docs.remove(0)
}

/// `node[a][b]...`, with a readable failure when a step is missing.
fn at<'a>(node: &'a Yaml, path: &[&str]) -> &'a Yaml {
    let mut n = node;
    for step in path {
        n = match step.parse::<usize>() {
            Ok(i) => &n[i],
            Err(_) => &n[*step],
        };
        assert!(!n.is_badvalue(), "no {} in {node:?}", path.join("."));
    }
    n
}

fn str_at<'a>(node: &'a Yaml, path: &[&str]) -> &'a str {
    at(node, path)
        .as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

#[test]
fn core_manifests_validate_against_the_kubernetes_schemas() {
    let out = Command::new("sh")
        .arg(repo().join("deploy/kubernetes/validate.sh"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run sh: {e}"));
    assert!(
        out.status.success(),
        "deploy/kubernetes/validate.sh failed ({}); it needs python3 with pip, or \
         `pip install kubernetes-validate` beforehand\n{}",
        out.status,
        output_text(&out)
    );
}

#[test]
fn generated_manifests_are_up_to_date() {
    let dir = ScratchDir::new("k8s-generated");
    let out = Command::new("sh")
        .arg(repo().join("deploy/kubernetes/generate.sh"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert_success("deploy/kubernetes/generate.sh", &out);
    for f in ["prometheusrule.yaml", "dashboards-configmap.yaml"] {
        let generated = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            generated == read(&format!("deploy/kubernetes/{f}")),
            "deploy/kubernetes/{f} is out of date: run deploy/kubernetes/generate.sh"
        );
    }
}

#[test]
fn prometheus_rule_carries_the_shipped_alerts_and_recording_rules() {
    let rule = yaml("deploy/kubernetes/prometheusrule.yaml");
    assert_eq!(str_at(&rule, &["apiVersion"]), "monitoring.coreos.com/v1");
    assert_eq!(str_at(&rule, &["kind"]), "PrometheusRule");
    assert_eq!(str_at(&rule, &["metadata", "namespace"]), "llmprobe");
    let mut shipped = Vec::new();
    for f in ["prometheus/alerts.yml", "deploy/prometheus/recording.yml"] {
        shipped.extend(at(&yaml(f), &["groups"]).as_vec().unwrap().iter().cloned());
    }
    let groups = at(&rule, &["spec", "groups"]).as_vec().unwrap();
    assert_eq!(
        groups, &shipped,
        "spec.groups must equal the shipped rule groups"
    );
    let names: Vec<&str> = groups.iter().map(|g| str_at(g, &["name"])).collect();
    assert_eq!(names, ["llmprobe", "llmprobe-fleet"]);
}

#[test]
fn dashboards_configmap_carries_the_dashboards_for_the_sidecar() {
    let cm = yaml("deploy/kubernetes/dashboards-configmap.yaml");
    assert_eq!(str_at(&cm, &["kind"]), "ConfigMap");
    assert_eq!(
        str_at(&cm, &["metadata", "labels", "grafana_dashboard"]),
        "1"
    );
    let data = at(&cm, &["data"]).as_hash().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("grafana/dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(data.len(), files.len());
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap();
        let text = data
            .get(&Yaml::String(name.into()))
            .and_then(Yaml::as_str)
            .unwrap_or_else(|| panic!("no {name} in the dashboards ConfigMap"));
        let in_map: serde_json::Value = serde_json::from_str(text).unwrap();
        let on_disk: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(in_map, on_disk, "{name}");
    }
}

#[test]
fn service_monitor_service_and_statefulset_fit_together() {
    let monitor = yaml("deploy/kubernetes/servicemonitor.yaml");
    let service = yaml("deploy/kubernetes/service.yaml");
    let set = yaml("deploy/kubernetes/statefulset.yaml");
    assert_eq!(
        str_at(&monitor, &["apiVersion"]),
        "monitoring.coreos.com/v1"
    );
    assert_eq!(str_at(&monitor, &["kind"]), "ServiceMonitor");
    // The ServiceMonitor selects the Service by its labels...
    let wanted = at(&monitor, &["spec", "selector", "matchLabels"])
        .as_hash()
        .unwrap();
    let labels = at(&service, &["metadata", "labels"]).as_hash().unwrap();
    for (k, v) in wanted {
        assert_eq!(labels.get(k), Some(v), "Service lacks label {k:?}");
    }
    let namespaces = at(&monitor, &["spec", "namespaceSelector", "matchNames"]);
    assert_eq!(
        namespaces[0].as_str(),
        Some(str_at(&service, &["metadata", "namespace"]))
    );
    // ...and scrapes a port the Service names, which is the container's.
    let port = str_at(&monitor, &["spec", "endpoints", "0", "port"]);
    assert_eq!(str_at(&service, &["spec", "ports", "0", "name"]), port);
    assert_eq!(
        str_at(&service, &["spec", "ports", "0", "targetPort"]),
        port
    );
    let container = at(&set, &["spec", "template", "spec", "containers", "0"]);
    assert_eq!(str_at(container, &["ports", "0", "name"]), port);
    // The Service is headless, governs the StatefulSet, and selects its pods.
    assert_eq!(str_at(&service, &["spec", "clusterIP"]), "None");
    assert_eq!(
        str_at(&set, &["spec", "serviceName"]),
        str_at(&service, &["metadata", "name"])
    );
    let pod_labels = at(&set, &["spec", "template", "metadata", "labels"])
        .as_hash()
        .unwrap();
    for (k, v) in at(&service, &["spec", "selector"]).as_hash().unwrap() {
        assert_eq!(pod_labels.get(k), Some(v), "pods lack label {k:?}");
    }
    // The job label is the Service name, which alerts.yml matches on.
    assert!(read("prometheus/alerts.yml").contains(&format!(
        "up{{job=\"{}\"}}",
        str_at(&service, &["metadata", "name"])
    )));
}

fn shard_count_env(set: &Yaml) -> i64 {
    let env = at(set, &["spec", "template", "spec", "containers", "0", "env"])
        .as_vec()
        .unwrap();
    let v = env
        .iter()
        .find(|e| e["name"].as_str() == Some("LLMPROBE__SHARD__COUNT"))
        .expect("LLMPROBE__SHARD__COUNT is set");
    str_at(v, &["value"]).parse().unwrap()
}

#[test]
fn statefulset_is_hardened_and_shards_by_pod_ordinal() {
    let set = yaml("deploy/kubernetes/statefulset.yaml");
    let replicas = at(&set, &["spec", "replicas"]).as_i64().unwrap();
    assert_eq!(
        shard_count_env(&set),
        replicas,
        "shard count must equal replicas"
    );

    let pod = at(&set, &["spec", "template", "spec"]);
    assert_eq!(
        at(pod, &["automountServiceAccountToken"]).as_bool(),
        Some(false)
    );
    assert_eq!(
        at(pod, &["securityContext", "runAsNonRoot"]).as_bool(),
        Some(true)
    );
    assert!(at(pod, &["securityContext", "runAsUser"]).as_i64().unwrap() > 0);
    assert_eq!(
        str_at(pod, &["securityContext", "seccompProfile", "type"]),
        "RuntimeDefault"
    );
    let c = at(pod, &["containers", "0", "securityContext"]);
    assert_eq!(at(c, &["readOnlyRootFilesystem"]).as_bool(), Some(true));
    assert_eq!(at(c, &["allowPrivilegeEscalation"]).as_bool(), Some(false));
    assert_eq!(at(c, &["runAsNonRoot"]).as_bool(), Some(true));
    assert_eq!(
        at(c, &["capabilities", "drop"]).as_vec().unwrap(),
        &[Yaml::String("ALL".into())]
    );
    assert!(
        at(c, &["capabilities"])["add"].is_badvalue(),
        "no capability is added"
    );
}

#[test]
fn configmap_config_is_valid_on_every_pod_and_the_pods_share_the_targets() {
    let set = yaml("deploy/kubernetes/statefulset.yaml");
    let replicas = at(&set, &["spec", "replicas"]).as_i64().unwrap();
    let config_map = yaml("deploy/kubernetes/configmap.yaml");
    let targets_map = yaml("deploy/kubernetes/configmap-targets.yaml");

    // Lay the mounted files out as the pod sees them, under a temporary root.
    let scratch = ScratchDir::new("k8s-pod");
    let root = scratch.path();
    let rooted = |text: &str| text.replace("/etc/llmprobe/", &format!("{}/", root.display()));
    std::fs::create_dir_all(root.join("targets")).unwrap();
    std::fs::create_dir_all(root.join("credentials")).unwrap();
    std::fs::write(root.join("credentials/api-key"), "sk-test").unwrap();
    let config = str_at(&config_map, &["data", "llmprobe.yaml"]);
    std::fs::write(root.join("llmprobe.yaml"), rooted(config)).unwrap();
    let mut discovered = 0;
    for (name, text) in at(&targets_map, &["data"]).as_hash().unwrap() {
        let (name, text) = (name.as_str().unwrap(), text.as_str().unwrap());
        let format =
            llmprobe::fleet::file_sd::Format::of(Path::new(name)).expect("a file_sd extension");
        let groups = llmprobe::fleet::file_sd::parse(text, format).unwrap();
        discovered += groups.iter().map(|g| g.targets.len()).sum::<usize>();
        std::fs::write(root.join("targets").join(name), text).unwrap();
    }
    assert!(discovered > 0);

    let check = |ordinal: i64| {
        llmprobe()
            .args(["check-config", "--config"])
            .arg(root.join("llmprobe.yaml"))
            .env("HOSTNAME", format!("llmprobe-{ordinal}"))
            .env("LLMPROBE__SHARD__COUNT", replicas.to_string())
            .output()
            .unwrap()
    };
    let mut measured = 0;
    for ordinal in 0..replicas {
        let out = check(ordinal);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pod {ordinal}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("skipped"), "{stdout}");
        let prefix = format!("shard {ordinal} of {replicas}: this instance measures ");
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in\n{stdout}"));
        let (owned, total) = line
            .strip_suffix(" targets")
            .and_then(|l| l.split_once(" of "))
            .unwrap();
        assert_eq!(total.parse::<usize>().unwrap(), discovered);
        measured += owned.parse::<usize>().unwrap();
    }
    assert_eq!(
        measured, discovered,
        "every target is measured by exactly one pod"
    );

    // A pod beyond the count (replicas raised without the env) refuses to start.
    let out = check(replicas);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("shard.index_from_hostname: shard"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
