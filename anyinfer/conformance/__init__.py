"""The AnyInfer conformance harness: `pytest --anyinfer-conformance`.

Modules:

- `anyinfer.conformance.plugin`: the pytest plugin (options, collection, fixtures, the matrix).
- `anyinfer.conformance.strategies`: Hypothesis strategies over provider scripts.
- `anyinfer.conformance.checker`: the guarantees, and the checks that decide them.
- `anyinfer.conformance.runner`: serving scripts to an adapter and reporting failures.
- `anyinfer.conformance.registry`: which adapters run, speaking which dialect.

Importing this package imports nothing else: the plugin must stay inert (and cheap)
for test runs that do not ask for the suite.
"""
