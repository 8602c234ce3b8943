"""PO samples of the regulator normalize and validate (POJEU's known defects included)."""

from __future__ import annotations

import pytest

from conftest import assert_sample_normalizes, sample_params


@pytest.mark.parametrize("path", sample_params("PO"))
def test_po_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)
