"""File storage: the port and its adapters (DESIGN.md "Files").

* :mod:`~export_center.storage.base`: the :class:`Storage` port, :class:`Space`,
  :class:`StoredObject` and the download answers.
* :mod:`~export_center.storage.keys`: the object-key scheme (only the server makes keys).
* :mod:`~export_center.storage.local`: :class:`LocalStorage`, a local or shared directory
  (the embedded default).
* :mod:`~export_center.storage.s3`: ``S3Storage``, an S3-compatible bucket (production;
  needs boto3, the ``s3`` extra, so it is not imported here), with its client
  (:mod:`~export_center.storage.s3_client`) and streaming multipart upload
  (:mod:`~export_center.storage.s3_multipart`).

The composition root picks the adapter (:func:`export_center.runtime.open_storage`).
"""

from export_center.storage.base import (
    DownloadAnswer,
    LocalFile,
    Proxied,
    Redirect,
    Space,
    Storage,
    StoredObject,
)
from export_center.storage.local import LocalStorage

__all__ = [
    "DownloadAnswer",
    "LocalFile",
    "LocalStorage",
    "Proxied",
    "Redirect",
    "Space",
    "Storage",
    "StoredObject",
]
