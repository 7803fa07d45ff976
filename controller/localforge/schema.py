"""The forge database's schema (SQLite). ``meta.schema_version`` records the version; ``UPGRADES``
bring an older file up to date in place (version 2 added ``pulls.closed_by``; version 3 added the
tables of labels, assignees, review requests, teams, commit statuses and check runs, which the
``CREATE TABLE IF NOT EXISTS`` statements below create in an older file too)."""

from __future__ import annotations

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ids (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
  id INTEGER PRIMARY KEY, login TEXT NOT NULL UNIQUE COLLATE NOCASE,
  type TEXT NOT NULL CHECK (type IN ('User', 'Organization', 'Bot')),
  site_admin INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
  token_hash TEXT PRIMARY KEY, account_id INTEGER NOT NULL REFERENCES accounts (id));
CREATE TABLE IF NOT EXISTS org_members (
  org_id INTEGER NOT NULL, user_id INTEGER NOT NULL, PRIMARY KEY (org_id, user_id));
CREATE TABLE IF NOT EXISTS repos (
  id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES accounts (id),
  name TEXT NOT NULL COLLATE NOCASE, description TEXT, private INTEGER NOT NULL,
  default_branch TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, pushed_at TEXT,
  last_number INTEGER NOT NULL DEFAULT 0, parent_id INTEGER REFERENCES repos (id), UNIQUE (owner_id, name));
CREATE TABLE IF NOT EXISTS collaborators (
  repo_id INTEGER NOT NULL, user_id INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('pull', 'triage', 'push', 'maintain', 'admin')),
  PRIMARY KEY (repo_id, user_id));
CREATE TABLE IF NOT EXISTS pulls (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, number INTEGER NOT NULL, user_id INTEGER NOT NULL,
  title TEXT NOT NULL, body TEXT, state TEXT NOT NULL CHECK (state IN ('open', 'closed')),
  draft INTEGER NOT NULL, head_repo_id INTEGER NOT NULL, head_ref TEXT NOT NULL, head_sha TEXT NOT NULL,
  base_ref TEXT NOT NULL, base_sha TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  closed_at TEXT, closed_by INTEGER, UNIQUE (repo_id, number));
CREATE TABLE IF NOT EXISTS reviews (
  id INTEGER PRIMARY KEY, pull_id INTEGER NOT NULL, user_id INTEGER NOT NULL, body TEXT NOT NULL,
  state TEXT NOT NULL, commit_id TEXT NOT NULL, submitted_at TEXT);
CREATE TABLE IF NOT EXISTS review_comments (
  id INTEGER PRIMARY KEY, pull_id INTEGER NOT NULL, repo_id INTEGER NOT NULL, review_id INTEGER,
  user_id INTEGER NOT NULL, body TEXT NOT NULL, path TEXT NOT NULL, line INTEGER, side TEXT NOT NULL,
  start_line INTEGER, start_side TEXT, position INTEGER, commit_id TEXT NOT NULL, diff_hunk TEXT NOT NULL,
  in_reply_to INTEGER, subject_type TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS issue_comments (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, number INTEGER NOT NULL, user_id INTEGER NOT NULL,
  body TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hooks (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, url TEXT NOT NULL, secret TEXT,
  events TEXT NOT NULL, active INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, name TEXT NOT NULL COLLATE NOCASE,
  color TEXT NOT NULL, description TEXT, is_default INTEGER NOT NULL DEFAULT 0, UNIQUE (repo_id, name));
CREATE TABLE IF NOT EXISTS issue_labels (
  repo_id INTEGER NOT NULL, number INTEGER NOT NULL, label_id INTEGER NOT NULL,
  PRIMARY KEY (repo_id, number, label_id));
CREATE TABLE IF NOT EXISTS assignees (
  repo_id INTEGER NOT NULL, number INTEGER NOT NULL, user_id INTEGER NOT NULL,
  PRIMARY KEY (repo_id, number, user_id));
CREATE TABLE IF NOT EXISTS teams (
  id INTEGER PRIMARY KEY, org_id INTEGER NOT NULL, slug TEXT NOT NULL COLLATE NOCASE, name TEXT NOT NULL,
  description TEXT, created_at TEXT NOT NULL, UNIQUE (org_id, slug));
CREATE TABLE IF NOT EXISTS team_members (
  team_id INTEGER NOT NULL, user_id INTEGER NOT NULL, PRIMARY KEY (team_id, user_id));
CREATE TABLE IF NOT EXISTS review_requests (
  pull_id INTEGER NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('user', 'team')),
  reviewer_id INTEGER NOT NULL, PRIMARY KEY (pull_id, kind, reviewer_id));
CREATE TABLE IF NOT EXISTS statuses (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, sha TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('error', 'failure', 'pending', 'success')),
  context TEXT NOT NULL, description TEXT, target_url TEXT, creator_id INTEGER NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS statuses_by_sha ON statuses (repo_id, sha, context);
CREATE TABLE IF NOT EXISTS check_suites (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, head_sha TEXT NOT NULL, app_id INTEGER NOT NULL,
  created_at TEXT NOT NULL, UNIQUE (repo_id, head_sha, app_id));
CREATE TABLE IF NOT EXISTS check_runs (
  id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, suite_id INTEGER NOT NULL, head_sha TEXT NOT NULL,
  name TEXT NOT NULL, app_id INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'waiting', 'requested',
    'pending')),
  conclusion TEXT CHECK (conclusion IS NULL OR conclusion IN ('action_required', 'cancelled', 'failure',
    'neutral', 'success', 'skipped', 'stale', 'timed_out')),
  details_url TEXT, external_id TEXT, started_at TEXT, completed_at TEXT, output TEXT NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS check_runs_by_sha ON check_runs (repo_id, head_sha);
"""


# version -> the statements that bring a database of the version before it up to it
UPGRADES: dict[int, list[str]] = {
    2: ["ALTER TABLE pulls ADD COLUMN closed_by INTEGER"],
    3: [],  # only new tables, which the schema's CREATE TABLE IF NOT EXISTS adds to any file
}


def statements() -> list[str]:
    """The schema as separate statements (run inside one transaction)."""
    return [part.strip() for part in SCHEMA.split(";") if part.strip()]
