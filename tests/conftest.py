"""Shared test configuration: Hypothesis profiles, and a frozen heap for each test.

Profiles live here, in the test suite, not in the shipped plugin. Pick one with the
`HYPOTHESIS_PROFILE` environment variable; without it, `ci` is used when the `CI`
environment variable is set and `dev` otherwise.

- `ci`: fast and reproducible — derandomized, no deadline, no example database, few
  examples (the conformance suite must finish in well under a minute).
- `dev`: Hypothesis defaults with no deadline (network round trips vary), capped.
- `deep`: many examples, for a thorough local run before a release.

Every test starts with the session's objects frozen (`gc.freeze()`), so a full garbage
collection during the test (the resource tests force dozens, to finalize dropped
streams, and the interpreter runs its own) walks only what the test made, not the whole
session's heap: late in the suite that heap is large, and an unfrozen `gc.collect()`
cost 0.3 s there. After the test the objects are unfrozen, so garbage of earlier tests
is still collected, one test later.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=30,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.register_profile(
    "deep",
    deadline=None,
    max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow],
)

settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture(autouse=True)
def _frozen_heap() -> Iterator[None]:
    """Freeze the objects that exist before the test (see the module docstring)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture
def otel() -> Iterator[tuple[Any, Any, Any]]:
    """`(OpenTelemetryObserver, span exporter, metric reader)` over in-memory SDK
    providers, shut down after the test (skipped without the `[otel]` extra)."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from anyinfer.otel import OpenTelemetryObserver

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    observer = OpenTelemetryObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield observer, exporter, reader
    meter_provider.shutdown()
    tracer_provider.shutdown()
