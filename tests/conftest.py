"""Shared test configuration: Hypothesis profiles.

Profiles live here, in the test suite, not in the shipped plugin. Pick one with the
`HYPOTHESIS_PROFILE` environment variable; without it, `ci` is used when the `CI`
environment variable is set and `dev` otherwise.

- `ci`: fast and reproducible — derandomized, no deadline, no example database, few
  examples (the conformance suite must finish in well under a minute).
- `dev`: Hypothesis defaults with no deadline (network round trips vary), capped.
- `deep`: many examples, for a thorough local run before a release.
"""

from __future__ import annotations

import os

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
