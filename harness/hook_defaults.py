"""Optional members of a declared interface, given their defaults where a class leaves them out.

The contestant and memory-provider interfaces (harness/contestants/base.py `Contestant`, harness/memory/provider.py
`MemoryProvider`) declare optional members (lifecycle hooks such as `preflight`), each with a documented default held
by a base class (`ContestantBase`, `ProviderBase`). A class that subclasses the base has them all. The interfaces are
structural, so a class written without the base qualifies too: where it enters the pipeline, `with_defaults` gives it
the base's default for each optional member it leaves out. Past that point every member is read or called directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class WithDefaults:
    """`inner`, with the default (an attribute of `defaults`) of each optional member it does not define; every other
    attribute, read or written, is `inner`'s own."""

    def __init__(self, inner: Any, defaults: Any, missing: Iterable[str]) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "_defaults", defaults)
        object.__setattr__(self, "defaulted", frozenset(missing))

    def __getattr__(self, name: str) -> Any:  # only for names this wrapper does not hold itself
        if name in self.defaulted:
            return getattr(self._defaults, name)
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)

    def __repr__(self) -> str:
        return f"{self.inner!r} (defaults: {', '.join(sorted(self.defaulted))})"


def with_defaults(obj: Any, defaults: type, members: Iterable[str]) -> Any:
    """`obj` itself when it defines every one of `members`; else `obj` with `defaults`' value for those it leaves out
    (`defaults` is the base class that holds them, built with no argument)."""
    missing = [m for m in members if not hasattr(obj, m)]
    return WithDefaults(obj, defaults(), missing) if missing else obj


def unwrapped(obj: Any) -> Any:
    """The object itself, without the defaults `with_defaults` gave it (what its own settings are read from)."""
    return obj.inner if isinstance(obj, WithDefaults) else obj
