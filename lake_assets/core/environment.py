"""Process environment set for a block only: libraries that read their configuration from
`os.environ` at one moment (a Sail server when it is created, a JVM when it is launched)."""

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set `values` in `os.environ` (None: unset) for the block, then put back what they replaced."""
    saved = {name: os.environ.get(name) for name in values}
    _apply(values)
    try:
        yield
    finally:
        _apply(saved)


def _apply(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
