"""The base every table of ``crucible.toml`` is validated with, shared by ``spec`` and ``broker``.

It lives apart from ``spec`` so that tables defined in their own modules (``[broker]``) use the same
rules without an import cycle: frozen, strict, finite, no unknown keys, and cross-field errors that
still name the exact key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _KeyedError(ValueError):
    """A cross-field error raised by a model validator, for a key below that model (``("knob", 0, "key")``).

    Pydantic places model-level errors at the model itself; the error converter appends ``path`` so the
    user still sees the exact key.
    """

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


class _Model(BaseModel):
    """Frozen, strict (``"5"`` is not an integer), finite, and no unknown keys anywhere."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        allow_inf_nan=False,
        validate_by_alias=True,
        validate_by_name=True,
    )
