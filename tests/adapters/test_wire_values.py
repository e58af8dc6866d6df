"""The wire value readers every adapter uses (`_providers/_wire.py`): a wrong value is a
`ProtocolError` naming the field, never a bare `TypeError` later."""

from __future__ import annotations

from typing import Any

import pytest

from anyinfer import ProtocolError
from anyinfer._providers._wire import as_int, opt_int


@pytest.mark.parametrize(("value", "expected"), [(None, None), (0, 0), (3, 3), (3.0, 3)])
def test_opt_int_reads_non_negative_integers(value: Any, expected: int | None) -> None:
    assert opt_int(value, "p", "usage.n") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "p: expected a non-negative integer at usage.n, got -1"),
        (-2.0, "p: expected a non-negative integer at usage.n, got -2"),
        (2.5, "p: expected an integer at usage.n, got float"),
        (True, "p: expected a number at usage.n, got bool"),
        ("3", "p: expected a number at usage.n, got str"),
    ],
)
def test_opt_int_refuses_what_is_not_a_count(value: Any, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        opt_int(value, "p", "usage.n")
    assert str(info.value) == message
    assert info.value.provider == "p"


def test_as_int_reads_none_as_zero_and_refuses_a_negative() -> None:
    assert as_int(None, "p", "x") == 0
    with pytest.raises(ProtocolError):
        as_int(-5, "p", "x")
