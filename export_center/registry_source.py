"""Which export-type registry a process uses: the one rule every command follows.

``serve`` (its start-up check and the runtime it builds), ``token``, ``registry check``,
the operator commands (``tasks``, ``outbox``, ``dlq``) and ``doctor`` all ask
:func:`registry_source`, so they name the same file, agree on whether ``provider_url:
self`` is allowed, and say the same sentence when there is no registry.

The rule:

* ``EXPORT_CENTER_EXPORT_TYPES_FILE`` set: that file. When it does not exist there is
  no registry, and the sentence says which path the setting names.
* unset, sample providers mounted (``EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS``, on by
  default for the embedded default only): the sample registry shipped with the
  ``providers`` package, whose types call ``provider_url: self``.
* unset, sample providers off (the default of ``production``): no registry. The
  shipped sample file is not the answer (its types need the sample providers), so the
  sentence says to set ``EXPORT_CENTER_EXPORT_TYPES_FILE``.

Whether the samples are mounted also decides whether ``provider_url: self`` is valid in
the file: it names the sample providers this process serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from export_center.registry import Registry, RegistryError, load_registry
from export_center.settings import Settings

__all__ = [
    "NoRegistry",
    "RegistrySource",
    "default_registry_path",
    "open_registry",
    "registry_problem",
    "registry_source",
]

_SET_IT = "export-center registry check FILE validates it"


class NoRegistry(RegistryError):
    """The settings name no registry file that exists; the message says what to set."""


@dataclass(frozen=True, slots=True)
class RegistrySource:
    """The registry a process uses, as :func:`registry_source` decided it.

    Attributes:
        path: the registry file, or None when the sample providers are off and
            ``EXPORT_CENTER_EXPORT_TYPES_FILE`` is unset. A path that does not exist
            is kept (it is what the setting names) and ``missing`` says so.
        samples_mounted: the sample providers are served by this process, so
            ``provider_url: self`` is valid in the file.
        missing: when there is no registry to read, the one sentence every command
            prints (what to set); None when ``path`` is a file to read.
    """

    path: Path | None
    samples_mounted: bool
    missing: str | None

    @property
    def shown(self) -> str:
        """What a command prints on its ``registry`` line: the resolved path, or why
        there is none."""
        if self.path is None:
            return "none (the sample providers are off: set EXPORT_CENTER_EXPORT_TYPES_FILE)"
        shown = str(self.path.resolve())
        return f"{shown} (does not exist)" if self.missing is not None else shown


def default_registry_path() -> Path:
    """The sample registry shipped with the ``providers`` package."""
    import providers

    return Path(providers.__file__).parent / "export_types.yaml"


def registry_source(settings: Settings) -> RegistrySource:
    """Decide which registry file ``settings`` name (module docstring: the rule).

    Args:
        settings: the process's settings (``export_types_file``,
            ``mount_sample_providers``).

    Returns:
        The file, whether the samples are mounted, and the sentence when there is no
        registry to read. Never raises; reading the file is :func:`open_registry`.
    """
    mounted = settings.mount_sample_providers
    named = settings.export_types_file
    if named is None:
        if mounted:
            return RegistrySource(default_registry_path(), True, None)
        return RegistrySource(
            None,
            False,
            "no export-type registry: the sample providers are off, so set "
            f"EXPORT_CENTER_EXPORT_TYPES_FILE to your registry file ({_SET_IT})",
        )
    path = Path(named)
    if not path.exists():
        return RegistrySource(
            path,
            mounted,
            f"no export-type registry: EXPORT_CENTER_EXPORT_TYPES_FILE names {path}, which "
            f"does not exist; set it to your registry file ({_SET_IT})",
        )
    return RegistrySource(path, mounted, None)


def open_registry(settings: Settings, source: RegistrySource | None = None) -> Registry:
    """Read and validate the registry :func:`registry_source` decided for ``settings``.

    Args:
        settings: the process's settings (also ``provider_allowed_hosts``).
        source: the decision, when the caller already made it.

    Raises:
        NoRegistry: there is no file to read (``source.missing``).
        RegistryError: the file is unreadable or invalid, naming the key and rule.
    """
    source = source or registry_source(settings)
    if source.missing is not None or source.path is None:
        raise NoRegistry(source.missing or "no export-type registry")
    return load_registry(
        source.path,
        allowed_hosts=set(settings.provider_allowed_hosts),
        allow_self=source.samples_mounted,
    )


def registry_problem(exc: RegistryError) -> str:
    """The line a command prints when it cannot use the registry: the sentence of
    :class:`NoRegistry` as it is, else ``invalid export-type registry: <key and rule>``."""
    return str(exc) if isinstance(exc, NoRegistry) else f"invalid export-type registry: {exc}"
