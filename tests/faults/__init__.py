"""The fault-injection suite's parts: a fake model that traces every turn by a token and fails on purpose,
the census that follows each turn through every tier, and the scenarios (see ``tests/test_faults.py``)."""
