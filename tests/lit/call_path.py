"""Checks lowering/README.md's "From a config to a launched kernel" paths against the code.

Each fenced block of that section is one path: a line is a file (relative to the repository) and
the calls to follow in it. Every name written `name()` must occur as `name(` in the file or its
header (definition or call), and a path may hold at most six files. Exits 1 naming each mismatch.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
text = (root / "lowering/README.md").read_text()
section = text.split("## From a config to a launched kernel", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```\n(.*?)```", section, re.S)
errors = []
if len(blocks) != 2:
    errors.append(f"expected 2 paths (host, GPU), found {len(blocks)}")
for block in blocks:
    files = []
    for line in block.strip().splitlines():
        path, _, calls = line.partition(" ")
        files.append(path)
        source = root / path
        if not source.is_file():
            errors.append(f"{path}: no such file")
            continue
        code = source.read_text()
        header = source.with_suffix(".h")
        if header.is_file():
            code += header.read_text()
        for name in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\(\)", calls):
            if not re.search(r"\b" + re.escape(name) + r"\(", code):
                errors.append(f"{path}: names {name}() but neither defines nor calls it")
    if len(set(files)) > 6:
        errors.append(f"a path of {len(set(files))} files: {', '.join(files)}")
for e in errors:
    print("call path:", e)
sys.exit(1 if errors else 0)
