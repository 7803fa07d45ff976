"""The round environment carries no store (issue 22, ADR-0045).

``RunContext`` reaches the run's record through its ``ledger`` only; publishing, the feedback watch,
refinement rounds and round jobs are handed the ports they use by their driver. These tests read the
types of its fields and properties (and of ``Hooks``, which the context carries) and fail on any that
names a store port, the concrete ``Store``, or a Protocol built on them, so a ``records`` or ``store``
attribute cannot come back unnoticed.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

import controller.store.ports as ports
from controller.services.execution.context import Hooks, RunContext
from controller.store.ledger import Ledger
from controller.store.store import Store

# Every port of the store (each small Protocol and each union), and the class behind them; the
# ledger alone is the environment's record.
STORE_TYPES: frozenset[type] = frozenset(
    {getattr(ports, name) for name in ports.__all__ if getattr(ports, name) is not Ledger} | {Store}
)


def _classes(annotation: object) -> set[type]:
    """The classes an annotation names, through unions, generics and their arguments."""
    found: set[type] = set()
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type):
        found.add(annotation)
    if origin is not None and isinstance(origin, type):
        found.add(origin)
    for arg in typing.get_args(annotation):
        found |= _classes(arg)
    return found


def _store_typed(annotation: object) -> list[str]:
    """The store types (or subclasses of one, such as a union Protocol defined elsewhere) it names."""
    return sorted(
        cls.__qualname__ for cls in _classes(annotation) if any(base in STORE_TYPES for base in cls.__mro__)
    )


@pytest.mark.parametrize("holder", [RunContext, Hooks], ids=lambda c: c.__name__)
def test_no_field_of_the_round_environment_is_typed_by_a_store_port(holder: type) -> None:
    hints = typing.get_type_hints(holder)
    offenders = {f.name: _store_typed(hints[f.name]) for f in dataclasses.fields(holder)}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_property_of_the_round_environment_returns_a_store_port() -> None:
    properties = {name: member for name, member in vars(RunContext).items() if isinstance(member, property)}
    assert properties, "the environment's properties are read (base_shas, champion_heads, ...)"
    offenders = {}
    for name, prop in properties.items():
        assert prop.fget is not None
        found = _store_typed(typing.get_type_hints(prop.fget).get("return"))
        if found:
            offenders[name] = found
    assert offenders == {}
    assert not hasattr(RunContext, "store") and not hasattr(RunContext, "records")


def test_the_ledger_is_the_environments_only_record() -> None:
    hints = typing.get_type_hints(RunContext)
    holding = [f.name for f in dataclasses.fields(RunContext) if Ledger in _classes(hints[f.name])]
    assert holding == ["ledger"]


def test_the_check_sees_a_store_port_in_any_shape() -> None:
    """The check itself: a port inside an optional, a union Protocol of ports and the class are seen."""

    class Mine(ports.PullRecords, typing.Protocol):
        """A union a module might define for itself."""

    assert _store_typed(ports.RunReads | None) == ["RunReads"]
    assert _store_typed(typing.Mapping[str, Mine]) == [
        "test_the_check_sees_a_store_port_in_any_shape.<locals>.Mine"
    ]
    assert _store_typed(Store) == ["Store"]
    assert _store_typed(Ledger | None) == []
