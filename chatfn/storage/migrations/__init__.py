"""Alembic migrations of every table chatfn keeps (core, outbox, reminders and APScheduler's job
store), shipped in the wheel and run by `storage.schema.upgrade` at start and by
`python bot.py migrate`. The scripts use only Alembic operations, never the project's models, so
a migration written today keeps meaning the same thing when the models change."""
