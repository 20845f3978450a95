"""The collector's tables, in SQL plain enough for PostgreSQL (TEXT, BIGINT, DOUBLE PRECISION,
composite primary keys; no SQLite-only types). Witnessed rows and scorings are append-only: the
triggers below refuse UPDATE and DELETE (on PostgreSQL, revoke both from the collector's role, or
use the same triggers written in PL/pgSQL)."""

from __future__ import annotations

TABLES = """
CREATE TABLE IF NOT EXISTS participants (
    id TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    participant TEXT NOT NULL REFERENCES participants(id),
    run_id BIGINT NOT NULL,
    env_id TEXT NOT NULL,
    direction TEXT,
    aggregation TEXT,
    visibility TEXT,
    time_limit_s DOUBLE PRECISION,
    created_at BIGINT NOT NULL,
    finish_n INTEGER
);
CREATE TABLE IF NOT EXISTS audit_rows (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    n INTEGER NOT NULL,
    called_at BIGINT NOT NULL,
    written_at BIGINT NOT NULL,
    working_ms BIGINT,
    kind TEXT NOT NULL,
    event TEXT,
    hash TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    line TEXT,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS scorings (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    n INTEGER NOT NULL,
    called_at BIGINT NOT NULL,
    working_ms BIGINT,
    score DOUBLE PRECISION,
    fingerprint TEXT,
    recount INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS refusals (
    at BIGINT NOT NULL,
    participant TEXT,
    session_id TEXT,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL
);
"""

APPEND_ONLY = ("audit_rows", "scorings", "refusals")


def triggers() -> list[str]:
    """SQLite triggers that make the witnessed tables append-only."""
    out = []
    for table in APPEND_ONLY:
        for op in ("UPDATE", "DELETE"):
            out.append(f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
                       f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;")
    return out


# Columns added since a study's database may have been made: (table, column, its SQL).
ADDED = (("scorings", "recount", "INTEGER NOT NULL DEFAULT 0"),
         ("sessions", "finish_n", "INTEGER"))  # the finish row's n (None: not finished)
