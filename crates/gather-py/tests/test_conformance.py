"""Every case of the shared conformance suite, run through the Python API (see conformance.py)."""

import pytest

from conformance import CaseFailure, case_dirs, run_case, suite_dir

CASES = case_dirs()


def test_the_suite_is_there():
    assert suite_dir() is not None, (
        "the conformance suite was not found: set GATHER_CONFORMANCE to its cases folder "
        "(shared/conformance/cases)"
    )
    assert len(CASES) > 1000


@pytest.mark.parametrize("folder", CASES, ids=[c.name for c in CASES])
def test_case(folder):
    try:
        run_case(folder)
    except CaseFailure as e:
        pytest.fail(f"{folder.name}: {e}", pytrace=False)
