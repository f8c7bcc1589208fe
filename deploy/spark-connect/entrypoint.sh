#!/bin/sh
# Start Spark Connect in the foreground with the arguments given (docker-compose.yml: the lake's
# --conf settings, none secret). The Iceberg REST catalog's client credential (the S3 key pair, as
# every lake client presents it) goes into spark-defaults.conf, mode 600, never onto the java
# command line; S3A reads the same pair from the environment.
set -eu
umask 077
mkdir -p "$SPARK_CONF_DIR"
printf 'spark.sql.catalog.lake.credential %s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" \
  > "$SPARK_CONF_DIR/spark-defaults.conf"
exec /opt/spark/sbin/start-connect-server.sh "$@"
