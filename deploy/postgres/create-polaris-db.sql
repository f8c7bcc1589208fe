-- Run once, when the Postgres volume is first initialised (docker-entrypoint-initdb.d): the
-- Polaris catalog's own database beside Dagster's (POSTGRES_DB), owned by the same role.
CREATE DATABASE polaris;
