"""String enums for user-facing choices (modes, strategies) with errors that list valid values."""

from __future__ import annotations

from enum import Enum


class ChoiceEnum(str, Enum):
    """A ``str`` Enum; ``parse`` raises ``ValueError`` naming the valid values.

    Subclasses define ``kind()`` (e.g. "retrieval mode") for the message.
    """

    @classmethod
    def kind(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def parse(cls, value):
        """The member for ``value`` (a member or its string value)."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown {cls.kind()} {value!r}; valid: {', '.join(m.value for m in cls)}") from None
