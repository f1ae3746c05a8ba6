"""The suite's ``xdist_group`` marks reach pytest-xdist's scheduler.

``--dist loadgroup`` (pyproject's addopts) sends the tests of one group to one worker, told by the
group's name appended to each test's node id on the workers. With pytest 9.2 and pytest-xdist 3.8
the name never reaches the node id (pytest-xdist #1386), and a group is silently spread over every
worker: each one then builds the group's module fixtures, or waits for another to build them.
pyproject's test extra keeps pytest below 9.2 until that is fixed; this test says when it breaks.
"""

from __future__ import annotations

import os

import pytest


def test_grouped_tests_carry_their_group_in_the_node_id(request: pytest.FixtureRequest) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("groups are named only on the workers of --dist loadgroup")
    grouped = [item for item in request.session.items if item.get_closest_marker("xdist_group")]
    if not grouped:
        pytest.skip("no grouped test collected")
    assert [item.nodeid for item in grouped if "@" not in item.nodeid] == []
