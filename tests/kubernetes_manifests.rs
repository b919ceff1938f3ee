//! The Kubernetes manifests of `deploy/kubernetes/`, offline:
//!
//! - `validate.sh`: what `kustomize build` (or `kubectl kustomize`) makes of
//!   the directory, against the Kubernetes OpenAPI schemas (the
//!   `kubernetes-validate` Python package, installed by the script when
//!   missing; the test fails when it cannot run);
//! - the rendered objects: the replica count, set once in
//!   kustomization.yaml, is each pod's shard count (also in an overlay that
//!   follows the documented recipe); the configuration ConfigMap is named by
//!   its content, so a change rolls the pods; PodDisruptionBudget,
//!   NetworkPolicy and topology spread select the pods; the labels a
//!   kube-prometheus-stack selects, and the documented patch that changes
//!   them;
//! - the generated manifests (PrometheusRule, dashboards ConfigMap) equal
//!   what `generate.sh` makes of `prometheus/alerts.yml`,
//!   `deploy/prometheus/recording.yml` and `grafana/dashboards/*.json`, so
//!   they cannot drift;
//! - the Prometheus Operator resources, which have no schema there, checked
//!   for structure: the PrometheusRule carries exactly the shipped groups,
//!   the ServiceMonitor selects the Service, which selects the pods;
//! - the StatefulSet's hardening, probes and sharding, and the generated
//!   config accepted by `llmprobe check-config` as each pod would see it.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::binary::llmprobe;
use support::paths::{read, relative, repo, ScratchDir};
use support::process::{assert_success, output_text};
use support::yaml::{at, str_at, yaml};
use yaml_rust2::{Yaml, YamlLoader};

/// `kustomize build DIR` (or `kubectl kustomize DIR`): every object it renders.
fn kustomize(dir: &Path) -> Vec<Yaml> {
    let kustomize = Command::new("kustomize").arg("build").arg(dir).output();
    let out = match kustomize {
        Ok(out) => out,
        Err(_) => Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "neither kustomize nor kubectl can be run ({e}): install one (kustomize v4.5+)"
                )
            }),
    };
    assert!(
        out.status.success(),
        "kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    YamlLoader::load_from_str(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// The objects `kubectl apply -k deploy/kubernetes` would apply.
fn rendered() -> Vec<Yaml> {
    kustomize(&repo().join("deploy/kubernetes"))
}

/// The one object of `kind` whose name starts with `name`.
fn object<'a>(objects: &'a [Yaml], kind: &str, name: &str) -> &'a Yaml {
    let found: Vec<&Yaml> = objects
        .iter()
        .filter(|o| o["kind"].as_str() == Some(kind))
        .filter(|o| {
            o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(name))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {kind} {name}* expected, found {found:?}"
    );
    found[0]
}

/// Renders an overlay of deploy/kubernetes whose kustomization.yaml is
/// `resources: [the base]` followed by `body`.
fn overlay(tag: &str, body: &str) -> Vec<Yaml> {
    let dir = ScratchDir::new(&format!("k8s-{tag}"));
    let base = relative(&repo().join("deploy/kubernetes"), dir.path());
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!("resources: [{}]\n{body}", base.display()),
    )
    .unwrap();
    kustomize(dir.path())
}

/// The labels of the pods the StatefulSet makes.
fn pod_labels(objects: &[Yaml]) -> yaml_rust2::yaml::Hash {
    at(
        object(objects, "StatefulSet", "llmprobe"),
        &["spec", "template", "metadata", "labels"],
    )
    .as_hash()
    .unwrap()
    .clone()
}

/// Every `matchLabels` pair is a label of the pods.
fn selects_the_pods(selector: &Yaml, pods: &yaml_rust2::yaml::Hash, what: &str) {
    let wanted = at(selector, &["matchLabels"]).as_hash().unwrap();
    assert!(!wanted.is_empty(), "{what}: empty selector");
    for (k, v) in wanted {
        assert_eq!(pods.get(k), Some(v), "{what}: pods lack label {k:?}");
    }
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
    assert_eq!(
        names,
        [
            "llmprobe-capacity",
            "llmprobe",
            "llmprobe-probes",
            "llmprobe-fleet",
            "llmprobe-autoscaling"
        ]
    );
}

#[test]
fn prometheus_operator_objects_carry_the_label_kube_prometheus_stack_selects() {
    let objects = rendered();
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let o = object(&objects, kind, "llmprobe");
        assert_eq!(
            str_at(o, &["metadata", "labels", "release"]),
            "kube-prometheus-stack",
            "{kind}"
        );
    }
    // The patch kustomization.yaml documents for another release name.
    let patch = "patches:
  - target: {group: monitoring.coreos.com}
    patch: |-
      - op: replace
        path: /metadata/labels/release
        value: my-release
";
    let documented: String = read("deploy/kubernetes/kustomization.yaml")
        .lines()
        .filter_map(|l| l.strip_prefix("#     "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        documented.contains(patch),
        "kustomization.yaml no longer documents\n{patch}"
    );
    let patched = overlay("release", patch);
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let o = object(&patched, kind, "llmprobe");
        assert_eq!(str_at(o, &["metadata", "labels", "release"]), "my-release");
    }
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
    let objects = rendered();
    let monitor = object(&objects, "ServiceMonitor", "llmprobe").clone();
    let service = object(&objects, "Service", "llmprobe").clone();
    let set = object(&objects, "StatefulSet", "llmprobe").clone();
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

/// LLMPROBE__SHARD__COUNT of the StatefulSet's container, as written.
fn shard_count_env(set: &Yaml) -> &str {
    let env = at(set, &["spec", "template", "spec", "containers", "0", "env"])
        .as_vec()
        .unwrap();
    let v = env
        .iter()
        .find(|e| e["name"].as_str() == Some("LLMPROBE__SHARD__COUNT"))
        .expect("LLMPROBE__SHARD__COUNT is set");
    str_at(v, &["value"])
}

/// The rendered StatefulSet's replicas and shard count.
fn replicas_and_shards(objects: &[Yaml]) -> (i64, i64) {
    let set = object(objects, "StatefulSet", "llmprobe");
    let replicas = at(set, &["spec", "replicas"]).as_i64().unwrap();
    let shards = shard_count_env(set)
        .parse()
        .unwrap_or_else(|e| panic!("shard count {:?}: {e}", shard_count_env(set)));
    (replicas, shards)
}

#[test]
fn the_replica_count_is_set_once_and_is_the_shard_count() {
    assert_eq!(replicas_and_shards(&rendered()), (3, 3));
    // statefulset.yaml alone has no count: applied without kustomize, the
    // pods refuse to start rather than shard wrongly.
    let raw = yaml("deploy/kubernetes/statefulset.yaml");
    assert!(
        raw["spec"]["replicas"].is_badvalue(),
        "a second replica count"
    );
    assert!(shard_count_env(&raw).parse::<i64>().is_err());
    // An overlay that follows kustomization.yaml's recipe: set `replicas:`,
    // copy `replacements:`.
    let base = read("deploy/kubernetes/kustomization.yaml");
    let replacements = &base[base.find("\nreplacements:").expect("replacements") + 1..];
    let objects = overlay(
        "replicas",
        &format!("replicas:\n  - name: llmprobe\n    count: 5\n{replacements}"),
    );
    assert_eq!(replicas_and_shards(&objects), (5, 5));
}

#[test]
fn statefulset_is_hardened_probed_and_spread() {
    let objects = rendered();
    let set = object(&objects, "StatefulSet", "llmprobe");
    let pod = at(set, &["spec", "template", "spec"]);
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

    // Liveness on /healthz, which fails once a measurement loop died;
    // readiness on /readyz.
    let container = at(pod, &["containers", "0"]);
    assert_eq!(
        str_at(container, &["livenessProbe", "httpGet", "path"]),
        "/healthz"
    );
    assert_eq!(
        str_at(container, &["readinessProbe", "httpGet", "path"]),
        "/readyz"
    );

    // Spread over zones and nodes, selecting these pods.
    let pods = pod_labels(&objects);
    let spread = at(pod, &["topologySpreadConstraints"]).as_vec().unwrap();
    let keys: Vec<&str> = spread.iter().map(|c| str_at(c, &["topologyKey"])).collect();
    assert_eq!(
        keys,
        ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    );
    for c in spread {
        selects_the_pods(&c["labelSelector"], &pods, "topologySpreadConstraints");
    }
}

#[test]
fn disruption_budget_and_network_policy_fit_the_pods() {
    let objects = rendered();
    let pods = pod_labels(&objects);
    let pdb = object(&objects, "PodDisruptionBudget", "llmprobe");
    assert_eq!(str_at(pdb, &["apiVersion"]), "policy/v1");
    assert_eq!(at(pdb, &["spec", "maxUnavailable"]).as_i64(), Some(1));
    selects_the_pods(at(pdb, &["spec", "selector"]), &pods, "PodDisruptionBudget");

    let policy = object(&objects, "NetworkPolicy", "llmprobe");
    let spec = at(policy, &["spec"]);
    selects_the_pods(at(spec, &["podSelector"]), &pods, "NetworkPolicy");
    let types: Vec<&str> = at(spec, &["policyTypes"])
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(types, ["Ingress", "Egress"]);
    // In: the metrics port only, from Prometheus.
    let ingress = at(spec, &["ingress"]).as_vec().unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(str_at(&ingress[0], &["ports", "0", "port"]), "metrics");
    assert_eq!(
        str_at(
            &ingress[0],
            &[
                "from",
                "0",
                "podSelector",
                "matchLabels",
                "app.kubernetes.io/name"
            ]
        ),
        "prometheus"
    );
    // Out: DNS, and the port of every target in configmap-targets.yaml.
    let mut allowed = Vec::new();
    for rule in at(spec, &["egress"]).as_vec().unwrap() {
        for p in at(rule, &["ports"]).as_vec().unwrap() {
            allowed.push(at(p, &["port"]).as_i64().unwrap());
        }
    }
    assert!(allowed.contains(&53), "no DNS in {allowed:?}");
    let targets = object(&objects, "ConfigMap", "llmprobe-targets");
    for (name, text) in at(targets, &["data"]).as_hash().unwrap() {
        let format = llmprobe::fleet::file_sd::Format::of(Path::new(name.as_str().unwrap()))
            .expect("a file_sd extension");
        for group in llmprobe::fleet::file_sd::parse(text.as_str().unwrap(), format).unwrap() {
            for t in &group.targets {
                let port: i64 = t.rsplit_once(':').unwrap().1.parse().unwrap();
                assert!(allowed.contains(&port), "egress to {t} is not allowed");
            }
        }
    }
}

#[test]
fn configmap_config_is_valid_on_every_pod_and_the_pods_share_the_targets() {
    let objects = rendered();
    let (replicas, _) = replicas_and_shards(&objects);
    let config_map = object(&objects, "ConfigMap", "llmprobe-config");
    let targets_map = object(&objects, "ConfigMap", "llmprobe-targets");

    // Lay the mounted files out as the pod sees them, under a temporary root.
    let scratch = ScratchDir::new("k8s-pod");
    let root = scratch.path();
    let rooted = |text: &str| text.replace("/etc/llmprobe/", &format!("{}/", root.display()));
    std::fs::create_dir_all(root.join("targets")).unwrap();
    std::fs::create_dir_all(root.join("credentials")).unwrap();
    std::fs::write(root.join("credentials/api-key"), "sk-test-key").unwrap();
    let config = str_at(config_map, &["data", "llmprobe.yaml"]);
    std::fs::write(root.join("llmprobe.yaml"), rooted(config)).unwrap();
    let mut discovered = 0;
    for (name, text) in at(targets_map, &["data"]).as_hash().unwrap() {
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

#[test]
fn the_config_map_is_named_by_its_content_so_a_change_rolls_the_pods() {
    let objects = rendered();
    let name = str_at(
        object(&objects, "ConfigMap", "llmprobe-config-"),
        &["metadata", "name"],
    )
    .to_string();
    let set = object(&objects, "StatefulSet", "llmprobe");
    let volumes = at(set, &["spec", "template", "spec", "volumes"])
        .as_vec()
        .unwrap();
    let config = volumes
        .iter()
        .find(|v| v["name"].as_str() == Some("config"))
        .expect("a config volume");
    assert_eq!(str_at(config, &["configMap", "name"]), name);
    assert_eq!(
        str_at(
            object(&objects, "ConfigMap", "llmprobe-config-"),
            &["data", "llmprobe.yaml"]
        ),
        read("deploy/kubernetes/llmprobe.yaml")
    );

    // The same directory with one setting changed: another name.
    let copy = ScratchDir::new("k8s-changed");
    for entry in std::fs::read_dir(repo().join("deploy/kubernetes")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
        }
    }
    let changed = read("deploy/kubernetes/llmprobe.yaml").replace("interval: 15m", "interval: 30m");
    assert_ne!(changed, read("deploy/kubernetes/llmprobe.yaml"));
    std::fs::write(copy.join("llmprobe.yaml"), changed).unwrap();
    let objects = kustomize(copy.path());
    let renamed = str_at(
        object(&objects, "ConfigMap", "llmprobe-config-"),
        &["metadata", "name"],
    );
    assert_ne!(renamed, name);
}
