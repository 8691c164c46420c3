"""pad_batch: the one padding helper, on hand-made known answers."""
import numpy as np
import pytest

from xlrepro.data.collate import pad_batch


def test_pads_to_the_longest_row_with_the_pad_id():
    ids, lengths = pad_batch([[5, 6, 7], [8], np.array([9, 10])], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    assert lengths.tolist() == [3, 1, 2] and ids.dtype == np.int64


def test_width_and_dtype():
    ids, lengths = pad_batch([[1, 2]], pad_id=-1, width=4, dtype=np.int32)
    assert ids.tolist() == [[1, 2, -1, -1]] and ids.dtype == np.int32 and lengths.tolist() == [2]


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="at least one"):
        pad_batch([], pad_id=0)
    with pytest.raises(ValueError, match="width 1 is shorter than the longest sequence \\(2\\)"):
        pad_batch([[1, 2]], pad_id=0, width=1)
