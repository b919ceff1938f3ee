#!/bin/sh
# Type-checks every dashboard in grafana/dashboards against Grafana's published
# schema (npm package @grafana/schema) with TypeScript. Exit status non-zero on
# any type error. Needs node and npm; `npm ci` runs once (registry access).
set -eu
cd "$(dirname "$0")"
if [ ! -d node_modules ]; then
  npm ci --no-audit --no-fund
fi
node generate.mjs
./node_modules/.bin/tsc --noEmit --strict -p tsconfig.json
echo "grafana dashboards: schema check passed (@grafana/schema $(node -p "require('@grafana/schema/package.json').version"))"
