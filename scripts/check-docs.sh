#!/usr/bin/env bash
# Checks of the prose documentation (README.md, CONTRIBUTING.md, docs/*.md), run
# by .ci/run; needs only python3 and no build:
#
# * every relative link points to a file or directory that exists, and every
#   #anchor to a heading of its target (GitHub's anchors: lower case, spaces to
#   hyphens, punctuation dropped, -1, -2 ... for repeated headings);
# * README.md is a front door: at most 250 lines, none over 120 characters
#   outside code blocks;
# * the README's quick start is the doctest in crates/rddp/src/lib.rs
#   (`cargo test -p rddp --doc` runs it), character for character;
# * no citation a reader cannot resolve, in the prose and in every other
#   tracked text file: the private digest's sections ("spec §"), its seeds
#   ("seed 000"), or this project's own issue or trap numbers. Cite the RFC with its section, a public upstream issue
#   (sctplab/usrsctp#709) or a page of docs/.
#
# Usage: scripts/check-docs.sh        exits 1 with one line per problem
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'EOF'
import os, re, sys

files = ["README.md", "CONTRIBUTING.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md"))
problems = []

def prose_lines(text):
    """(line number, line) outside fenced and indented code blocks."""
    fence = None
    prev_blank = True
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev_blank = False
            continue
        if m:
            fence = m.group(1)
            continue
        indented = line.startswith("    ") and prev_blank
        if indented:
            # an indented block stays one while its lines are indented or blank
            continue
        prev_blank = line.strip() == ""
        yield n, line

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"<[^>]+>", "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, out = {}, set()
        text = open(path, encoding="utf-8").read()
        for _, line in prose_lines(text):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(2))
            k = seen.get(base, 0)
            out.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
        anchors_cache[path] = out
    return anchors_cache[path]

link_re = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
cite_re = re.compile(r"spec §|\b[Ss]eeds? 00\d|\b[Ii]ssues? \d+|\b[Tt]raps? \d+")

for path in files:
    if not os.path.exists(path):
        problems.append(f"{path}: missing")
        continue
    text = open(path, encoding="utf-8").read()
    base_dir = os.path.dirname(path)
    for n, line in prose_lines(text):
        plain = re.sub(r"`[^`]*`", "", line)
        for m in link_re.finditer(plain):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base_dir, file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{path}:{n}: link to {target}: no such file")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{path}:{n}: link to {target}: no such heading in {dest}")
        m = cite_re.search(line)
        if m:
            problems.append(f"{path}:{n}: unresolvable citation {m.group(0)!r}")

readme = open("README.md", encoding="utf-8").read()
lines = readme.split("\n")
if readme.endswith("\n"):
    lines = lines[:-1]
if len(lines) > 250:
    problems.append(f"README.md: {len(lines)} lines, at most 250")
for n, line in prose_lines(readme):
    if len(line) > 120:
        problems.append(f"README.md:{n}: {len(line)} characters, at most 120 outside code blocks")

m = re.search(r"^## Quick start\n.*?^```rust\n(.*?)^```$", readme, re.S | re.M)
lib = open("crates/rddp/src/lib.rs", encoding="utf-8").read()
doc = "\n".join(l[4:] if l.startswith("//! ") else l[3:] for l in lib.split("\n") if l.startswith("//!"))
blocks = re.findall(r"^```\n(.*?)^```$", doc, re.S | re.M)
if not m:
    problems.append("README.md: no ```rust block under \"## Quick start\"")
elif m.group(1) not in blocks:
    problems.append("README.md: the quick start differs from every doctest of crates/rddp/src/lib.rs")

# The same rule over every other tracked text file: code comments cite too.
import subprocess
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
prose = set(files)
for path in tracked:
    if path in prose or path == "scripts/check-docs.sh" or not os.path.isfile(path):
        continue
    try:
        text = open(path, encoding="utf-8").read()
    except UnicodeDecodeError:
        continue  # binary: corpora, captures
    for n, line in enumerate(text.split("\n"), 1):
        m = cite_re.search(line)
        if m:
            problems.append(f"{path}:{n}: unresolvable citation {m.group(0)!r}")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"check-docs: {len(files)} files, links, README limits and quick start fine")
EOF
