"""Notifications: who is told when an export ends, and how (the notification outbox,
its channels and the targets a create or a schedule names)."""
