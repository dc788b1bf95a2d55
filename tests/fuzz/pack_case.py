#!/usr/bin/env python3
"""Packs a case folder into one CaseFolderFuzz input: its six files joined by "@@M3IDX@".
Usage: pack_case.py CASE_DIR OUT_FILE"""
import sys
from pathlib import Path

FILES = ["case.json", "q.npy", "kv.npy", "block_table.npy", "seq_lens.npy", "query_start_loc.npy"]
case = Path(sys.argv[1])
Path(sys.argv[2]).write_bytes(b"@@M3IDX@".join((case / f).read_bytes() for f in FILES))
