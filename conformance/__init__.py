"""The AnyInfer conformance harness: `pytest --anyinfer-conformance`.

Modules:

- `conformance.plugin`: the pytest plugin (options, collection, fixtures, the matrix).
- `conformance.strategies`: Hypothesis strategies over provider scripts.
- `conformance.checker`: the guarantees, and the checks that decide them.
- `conformance.runner`: serving scripts to an adapter and reporting failures.
- `conformance.registry`: which adapters run, speaking which dialect.

Importing this package imports nothing else: the plugin must stay inert (and cheap)
for test runs that do not ask for the suite.
"""
