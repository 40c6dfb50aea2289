"""The channels a notification is delivered by (``page`` needs none: its rows are the
in-page list)."""
