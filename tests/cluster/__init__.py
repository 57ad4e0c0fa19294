"""The local GPU cluster for the tests and benchmarks: `python -m tests.cluster up|down|status|build`."""
