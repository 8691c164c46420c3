"""The Parallel Bible Corpus (Mayer & Cysouw 2014, LREC), distributed for research by its authors on request
(http://www.paralleltext.info/data/): one file per edition (e.g. ``eng-x-bible-kingjames.txt``), comment lines starting with "#", then
``<8-digit verse id><TAB>text`` (the id: book, chapter, verse as BBCCCVVV).

The reader lives with the Bible corpora of the lab (`xlrepro.data.bible.read_pbc`); it is re-exported here so
that every resource of the paper profile has a loader in this package.
"""
from __future__ import annotations

from ..data.bible import NEW_TESTAMENT, OLD_TESTAMENT, PBC_DEV_FILE, PBC_TRAIN_FILE, read_pbc

__all__ = ["read_pbc", "PBC_TRAIN_FILE", "PBC_DEV_FILE", "NEW_TESTAMENT", "OLD_TESTAMENT"]
