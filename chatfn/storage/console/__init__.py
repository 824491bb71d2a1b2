"""The admin console's reads and writes (chatfn/channels/http/admin, docs/admin-api.md): synchronous
functions over the engine, each called through `Storage.run` (never on the event loop), as
every storage call is. They read what the bot records anyway (history, tool-call audit,
model_usage, limit counters, outbox, reminders); what they write is the console's own (its
sessions and audit log) and what an operator changes (overrides, outbox retries).

scope      a console user's `chats:` patterns, as a SQL clause and an exact check
sessions   logins, the console's audit log, the workers' metric snapshots
stats      overview and usage: counts per bucket, percentiles, CSV rows
chats      the chat list, one chat's facts, its history with tool calls
trace      one incoming message: its model requests, tool calls, replies and deliveries
"""
