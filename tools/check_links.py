"""Every relative link in the README and docs/ resolves: the file exists, and
an anchor (#section) names a heading of that file as GitHub renders it.

    check_links.py REPO_ROOT

Prints each broken link as FILE:LINE: LINK (why) and exits 1 when there is
one. External links (http, https, mailto) are not followed.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped
    (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            fenced = False
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def documents():
    yield os.path.join(ROOT, "README.md")
    for d, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(d, name)


broken = 0
for doc in documents():
    with open(doc, encoding="utf-8") as f:
        fenced = False
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                where = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                why = None
                if not os.path.exists(where):
                    why = "no such file"
                elif anchor and where.endswith(".md") and anchor not in anchors(where):
                    why = f"no heading #{anchor} in {os.path.relpath(where, ROOT)}"
                if why:
                    broken += 1
                    print(f"{os.path.relpath(doc, ROOT)}:{number}: {target} ({why})")

if broken:
    print(f"{broken} broken link(s)")
    sys.exit(1)
print("every relative link resolves")
