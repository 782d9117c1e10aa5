#!/bin/sh
# Temporal's two PostgreSQL databases, created when missing and brought to the schema of the server release, with
# Temporal's own sql tool. docker-compose.yml's `temporal-schema` job runs this file in temporalio/admin-tools;
# `npm run cluster` runs the same file with the sql tool it built (scripts/cluster.ts). Idempotent: create-database
# ignores a database that exists, setup-schema -v 0.0 creates only missing version tables, update-schema applies only
# the versions that are newer.
#
# Environment: SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (read by the sql tool itself);
# TEMPORAL_SQL_TOOL (default temporal-sql-tool), SCHEMA_DIR (default /etc/temporal/schema, the image's).
set -eu
tool="${TEMPORAL_SQL_TOOL:-temporal-sql-tool}"
versioned="${SCHEMA_DIR:-/etc/temporal/schema}/postgresql/v12"
for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  schema="${pair#*:}"
  "$tool" --db "$db" create-database
  "$tool" --db "$db" setup-schema -v 0.0
  "$tool" --db "$db" update-schema -d "$versioned/$schema/versioned"
  echo "schema: database $db is up to date"
done
