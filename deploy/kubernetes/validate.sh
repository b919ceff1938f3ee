#!/bin/sh
# Validates the core Kubernetes manifests offline against the Kubernetes
# OpenAPI schemas bundled with the `kubernetes-validate` Python package
# (installed with pip when missing; no cluster and no network needed once
# installed). Strict: unknown fields are errors. The Prometheus Operator's
# CRDs (ServiceMonitor, PrometheusRule) have no schema there; their structure
# is checked by tests/kubernetes_manifests.rs.
# Exits non-zero when any manifest is invalid.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

# The oldest Kubernetes these manifests support, and the newest bundled.
versions=${K8S_VERSIONS:-"1.27.0 1.37.0"}

core="namespace.yaml serviceaccount.yaml configmap.yaml configmap-targets.yaml
service.yaml statefulset.yaml dashboards-configmap.yaml"

if ! command -v kubernetes-validate >/dev/null 2>&1; then
    echo "kubernetes-validate not found: installing it with pip" >&2
    python3 -m pip install --quiet --disable-pip-version-check kubernetes-validate >&2 || {
        echo "cannot install kubernetes-validate (pip install kubernetes-validate)" >&2
        exit 1
    }
fi

status=0
for v in $versions; do
    for f in $core; do
        # --quiet prints failures only; the exit status says whether all passed.
        if ! kubernetes-validate --strict --quiet --kubernetes-version "$v" "$here/$f"; then
            echo "INVALID for Kubernetes $v: $f" >&2
            status=1
        fi
    done
done
if [ "$status" -eq 0 ]; then
    echo "all core manifests valid for Kubernetes $versions"
fi
exit "$status"
