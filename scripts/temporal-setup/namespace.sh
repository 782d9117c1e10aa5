#!/bin/sh
# The payments namespace on a Temporal server: waits until the frontend is healthy, creates the namespace with an
# explicit retention when it is missing, registers the search attributes that are missing, and waits until the
# namespace answers a visibility query. docker-compose.yml's `temporal-namespace` job runs this file in
# temporalio/admin-tools; `npm run cluster` runs the same file with the provisioned CLI at the server's first start (a
# restart keeps the namespace, which lives in PostgreSQL).
#
# Environment: TEMPORAL_ADDRESS (read by the CLI itself), NAMESPACE, NAMESPACE_RETENTION (e.g. 72h),
# SEARCH_ATTRIBUTES (space separated Name=Type pairs), TEMPORAL_CLI (default temporal), SETUP_TIMEOUT_S (default 120).
set -eu
cli="${TEMPORAL_CLI:-temporal}"
ns="${NAMESPACE:?set NAMESPACE}"
retention="${NAMESPACE_RETENTION:?set NAMESPACE_RETENTION}"
deadline=$(($(date +%s) + ${SETUP_TIMEOUT_S:-120}))

# retry COMMAND...: until it succeeds, once a second, until the deadline.
retry() {
  until "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "namespace: gave up after ${SETUP_TIMEOUT_S:-120} s: $*" >&2
      return 1
    fi
    sleep 1
  done
}

ensure_namespace() {
  "$cli" operator namespace describe --namespace "$ns" >/dev/null 2>&1 ||
    "$cli" operator namespace create --namespace "$ns" --retention "$retention"
}

ensure_attribute() {
  "$cli" operator search-attribute list --namespace "$ns" | grep -qw "$1" ||
    "$cli" operator search-attribute create --namespace "$ns" --name "$1" --type "$2"
}

retry "$cli" operator cluster health
retry ensure_namespace
echo "namespace: $ns present (a new one gets a retention of $retention)"
for pair in ${SEARCH_ATTRIBUTES:-}; do
  retry ensure_attribute "${pair%%=*}" "${pair#*=}"
  echo "namespace: search attribute ${pair%%=*} (${pair#*=}) registered"
done
retry "$cli" workflow list --namespace "$ns" --limit 1 >/dev/null
echo "namespace: $ns serves"
