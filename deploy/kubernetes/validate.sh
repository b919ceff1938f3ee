#!/bin/sh
# Renders deploy/kubernetes with kustomize (`kustomize build`, or the one in
# `kubectl kustomize`; v4.5 or later, for replacements) and validates every
# object offline against the Kubernetes OpenAPI schemas bundled with the
# `kubernetes-validate` Python package (installed with pip into a virtual
# environment when missing; no cluster, and no network once installed).
# Strict: unknown fields are errors. The Prometheus Operator's CRDs
# (ServiceMonitor, PrometheusRule) and KEDA's ScaledObject have no schema
# there; their structure is checked by tests/kubernetes_manifests.rs and
# tests/autoscaling.rs.
# Usage: validate.sh [RENDERED_OUTPUT_FILE]   (keeps the rendered manifests)
#        validate.sh --files FILE...          (plain manifests, as written:
#                                               deploy/autoscaling/hpa.yaml)
# Exits non-zero when any manifest is invalid.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = "--files" ]; then
    shift
    [ $# -ge 1 ] || { echo "--files needs at least one file" >&2; exit 1; }
    render="the files"
    what="$*"
    keep=1
else
    if command -v kustomize >/dev/null 2>&1; then
        render="kustomize build"
    elif command -v kubectl >/dev/null 2>&1; then
        render="kubectl kustomize"
    else
        echo "neither kustomize nor kubectl found: install one (kustomize v4.5 or later)" >&2
        exit 1
    fi
    rendered=${1:-$(mktemp)}
    $render "$here" >"$rendered"
    what=$rendered
    [ $# -ge 1 ] && keep=1 || keep=0
fi

# The oldest Kubernetes these manifests support, and the newest bundled.
versions=${K8S_VERSIONS:-"1.27.0 1.37.0"}


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
    # --quiet prints failures only (and a warning for each CRD kind, which has
    # no schema here); the exit status says whether all passed.
    # shellcheck disable=SC2086 # $what is a list of paths
    if ! "$kv" --strict --quiet --kubernetes-version "$v" $what; then
        echo "INVALID for Kubernetes $v: $render $what" >&2
        status=1
    fi
done
if [ "$status" -eq 0 ]; then
    echo "all manifests of $render valid for Kubernetes $versions"
fi
[ "$keep" -eq 1 ] || rm -f "$rendered"
exit "$status"
