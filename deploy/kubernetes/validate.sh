#!/bin/sh
# Validates the core Kubernetes manifests offline against the Kubernetes
# OpenAPI schemas bundled with the `kubernetes-validate` Python package
# (installed with pip into a virtual environment when missing; no cluster,
# and no network once installed). Strict: unknown fields are errors. The
# Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule) have no schema
# there; their structure is checked by tests/kubernetes_manifests.rs.
# Exits non-zero when any manifest is invalid.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

# The oldest Kubernetes these manifests support, and the newest bundled.
versions=${K8S_VERSIONS:-"1.27.0 1.37.0"}

core="namespace.yaml serviceaccount.yaml configmap.yaml configmap-targets.yaml
service.yaml statefulset.yaml dashboards-configmap.yaml"

# Installed in a virtual environment of its own when not on PATH: no root
# needed, and Debian's system Python refuses `pip install` (PEP 668).
if command -v kubernetes-validate >/dev/null 2>&1; then
    kv=kubernetes-validate
else
    venv=${KUBERNETES_VALIDATE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/llmprobe/kubernetes-validate}
    kv=$venv/bin/kubernetes-validate
    if [ ! -x "$kv" ]; then
        echo "kubernetes-validate not found: installing it with pip into $venv" >&2
        { python3 -m venv "$venv" &&
            "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate; } >&2 || {
            echo "cannot install kubernetes-validate (needs python3 with venv and pip, and PyPI once)" >&2
            exit 1
        }
    fi
fi

status=0
for v in $versions; do
    for f in $core; do
        # --quiet prints failures only; the exit status says whether all passed.
        if ! "$kv" --strict --quiet --kubernetes-version "$v" "$here/$f"; then
            echo "INVALID for Kubernetes $v: $f" >&2
            status=1
        fi
    done
done
if [ "$status" -eq 0 ]; then
    echo "all core manifests valid for Kubernetes $versions"
fi
exit "$status"
