"""File storage: the port and its adapters (local directory; S3)."""

from export_center.storage.local import *  # noqa: F403
from export_center.storage.local import __all__  # noqa: F401
