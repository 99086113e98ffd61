#!/usr/bin/env python3
"""Checks ctrial's layering rule (docs/design.md, "Layers").

    tools/check_layers.py SOURCE_DIR [--objects FILE]

The rule is the USES list of each ctrial_module(...) in src/CMakeLists.txt and
shim/CMakeLists.txt: a module may use the modules it lists and, through them,
what they list. This script fails (exit 1, one line per violation) when

  1. a file of module M includes an internal header of a module M may not
     use ("dist/grad_sync.h" from src/config/, a bare "x.h" outside the
     module's own folder, a path with ".."), or the USES lists form a cycle;
  2. docs/design.md's table of modules ("| module | uses | ...") says
     something else than the CMake lists, or calls a module pure C while it
     uses the shim (or the other way round);
  3. docs/design.md's diagram (the first code block under "## Layers")
     leaves a module out, or draws one at or below a module it uses (each
     row's leading words that are module names are that row's modules);
  4. the README's layout lists other modules in its `src/` row than the
     CMake lists, or other headers in its `include/ctrial/` row than the
     folder holds;
  5. docs/api/error.md's table of codes says something else than
     error.h's CT_ERRNO_MAP;
  6. a public header is named in no row of the design's table, or in more
     than one (its last column: the public headers the module implements);
  7. an internal header (src/**/*.h, shim/*.h) names something ct_* that no
     public header declares: what files share inside ctrial is named cti_*
     (docs/design.md, "Names"), so that ct_* always means the API;
  8. with --objects (a file of lines "MODULE: OBJECT..." that the test
     suite generates from the build): an object of module M refers to a
     symbol that another module defines and M may not use. This catches a
     call across the rule that no include shows (a public header's
     function implemented in a module above), and proves that the pure-C
     modules call nothing in the shim. Also: a function a public header
     declares (CT_API) is defined by another module than the one whose row
     names the header, so each header belongs to one module.

Public headers (<ctrial/...>) may be included anywhere: they are the API.
"""
import argparse
import os
import re
import subprocess
import sys

MODULE_CALL = re.compile(r"ctrial_module\(\s*(\w+)([^)]*)\)", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_rule(root):
    """{module: [used modules]} from the CMake lists, in file order."""
    rule = {}
    for rel in ("shim/CMakeLists.txt", "src/CMakeLists.txt"):
        text = open(os.path.join(root, rel)).read()
        text = re.sub(r"#.*", "", text)
        for name, args in MODULE_CALL.findall(text):
            words = args.split()
            uses = []
            if "USES" in words:
                i = words.index("USES") + 1
                while i < len(words) and words[i] not in ("LIBS", "SOURCES"):
                    uses.append(words[i])
                    i += 1
            rule[name] = uses
    return rule


def closure(rule, m):
    seen, todo = set(), list(rule.get(m, []))
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(rule.get(x, []))
    return seen


def find_cycles(rule, errors):
    for m in rule:
        if m in closure(rule, m):
            errors.append(f"src/CMakeLists.txt: module {m} uses itself through {sorted(closure(rule, m))}")
        for u in rule[m]:
            if u not in rule:
                errors.append(f"src/CMakeLists.txt: module {m} uses '{u}', which is no module")


def module_files(root, rule):
    for m in rule:
        folder = os.path.join(root, "shim" if m == "shim" else os.path.join("src", m))
        for name in sorted(os.listdir(folder)):
            if name.endswith((".c", ".h", ".cpp")):
                yield m, os.path.join(folder, name)


def check_includes(root, rule, errors):
    for m, path in module_files(root, rule):
        rel = os.path.relpath(path, root)
        allowed = closure(rule, m) | {m}
        for inc in INCLUDE.findall(open(path).read()):
            if inc.startswith("ctrial/"):
                continue
            if ".." in inc.split("/"):
                errors.append(f"{rel}: #include \"{inc}\": internal headers are included by module, not by '..'")
                continue
            if "/" not in inc:
                # Only the shim includes its own headers by name (it is one folder
                # of C++, outside src/).
                if m == "shim" and os.path.exists(os.path.join(root, "shim", inc)):
                    continue
                errors.append(f"{rel}: #include \"{inc}\": include internal headers as \"module/file.h\"")
                continue
            target = inc.split("/")[0]
            if target not in rule:
                errors.append(f"{rel}: #include \"{inc}\": '{target}' is no module")
            elif target not in allowed:
                errors.append(f"{rel}: #include \"{inc}\": module {m} may not use module {target} "
                              f"(it uses {', '.join(sorted(allowed - {m})) or 'nothing'})")
            elif not os.path.exists(os.path.join(root, "src", inc)):
                errors.append(f"{rel}: #include \"{inc}\": no such header")


def check_design(root, rule, errors):
    path = os.path.join(root, "docs", "design.md")
    if not os.path.exists(path):
        errors.append("docs/design.md: missing (it states the layering rule)")
        return
    rows = {}
    for line in open(path):
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in rule:
            uses = [u.strip("` ") for u in re.split(r"[,\s]+", cells[1]) if u.strip("` ") and u.strip("` ") != "—"]
            rows[cells[0]] = (uses, cells[2].lower(), re.findall(r"`(\w+\.h)`", line.rsplit("|", 2)[-2]))
    for m, uses in rule.items():
        if m not in rows:
            errors.append(f"docs/design.md: module {m} is missing from the table of modules")
            continue
        doc_uses, kind, _ = rows[m]
        if sorted(doc_uses) != sorted(uses):
            errors.append(f"docs/design.md: module {m} uses {', '.join(doc_uses) or 'nothing'} in the table, "
                          f"{', '.join(uses) or 'nothing'} in CMake")
        pure = m != "shim" and "shim" not in closure(rule, m)
        if pure != kind.startswith("pure c"):
            errors.append(f"docs/design.md: module {m} is {'pure C' if pure else 'above the shim'} by its USES, "
                          f"but the table says '{rows[m][1]}'")


def header_owners(root, rule):
    """{public header: [modules whose table row names it]}, every header listed."""
    owners = {h: [] for h in os.listdir(os.path.join(root, "include", "ctrial")) if h.endswith(".h")}
    for line in open(os.path.join(root, "docs", "design.md")):
        raw = line.strip().strip("|").split("|")
        name = raw[0].strip().strip("`")
        if len(raw) >= 5 and name in rule:
            for h in re.findall(r"`(\w+\.h)`", raw[-1]):
                owners.setdefault(h, []).append(name)
    return owners


def check_header_rows(root, rule, errors):
    for h, mods in sorted(header_owners(root, rule).items()):
        if not os.path.exists(os.path.join(root, "include", "ctrial", h)):
            errors.append(f"docs/design.md: module {', '.join(mods)} implements {h}, which is no public header")
        elif len(mods) != 1:
            errors.append(f"docs/design.md: public header {h} is named by {len(mods)} modules' rows "
                          f"({', '.join(mods) or 'none'}): each header belongs to one module")


def check_header_symbols(root, rule, defined, errors):
    owners = header_owners(root, rule)
    for h, mods in sorted(owners.items()):
        path = os.path.join(root, "include", "ctrial", h)
        if len(mods) != 1 or not os.path.exists(path):
            continue  # check_header_rows said so
        text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
        for name in sorted(set(re.findall(r"CT_API[^;{]*?\b(ct_\w+)\s*\(", text, re.S))):
            where = [m for m, syms in defined.items() if name in syms]
            if not where:
                errors.append(f"include/ctrial/{h}: {name} is declared but no module defines it")
            elif mods[0] not in where:
                errors.append(f"include/ctrial/{h}: {name} is defined by module {where[0]}, but the header is "
                              f"module {mods[0]}'s (docs/design.md): move the declaration to a header of "
                              f"{where[0]}'s, or the definition")


def check_internal_names(root, rule, errors):
    public = set()
    folder = os.path.join(root, "include", "ctrial")
    for h in os.listdir(folder):
        if h.endswith(".h"):
            public |= set(re.findall(r"\bct_\w+", open(os.path.join(folder, h)).read()))
    for m, path in module_files(root, rule):
        if not path.endswith(".h"):
            continue
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(path).read(), flags=re.S)
        text = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)
        for name in sorted(set(re.findall(r"\bct_\w+", text)) - public):
            errors.append(f"{os.path.relpath(path, root)}: {name} is internal but named like the API: "
                          f"call it cti_{name[3:]} (docs/design.md, \"Names\")")


def check_diagram(root, rule, errors):
    text = open(os.path.join(root, "docs", "design.md")).read()
    m = re.search(r"^## Layers\n.*?^```\n(.*?)^```", text, re.S | re.M)
    if not m:
        errors.append("docs/design.md: no diagram (a code block) under '## Layers'")
        return
    row_of, rows = {}, 0
    for line in m.group(1).splitlines():
        words = line.replace("─", " ").replace("│", " ").split()
        drawn = []
        for w in words:
            if w not in rule:
                break
            drawn.append(w)
        if drawn:
            rows += 1
            for w in drawn:
                if w in row_of:
                    errors.append(f"docs/design.md: the diagram of layers draws {w} twice")
                row_of[w] = rows  # rows count down the page: a larger number is lower
    for mod, uses in rule.items():
        if mod not in row_of:
            errors.append(f"docs/design.md: module {mod} is missing from the diagram of layers")
            continue
        for u in uses:
            if u in row_of and row_of[u] <= row_of[mod]:
                errors.append(f"docs/design.md: the diagram draws {u} at or above {mod}, which uses it")


def check_readme(root, rule, errors):
    text = open(os.path.join(root, "README.md")).read()
    src = re.search(r"^\| `src/` \|(.*)$", text, re.M)
    inc = re.search(r"^\| `include/ctrial/` \|(.*)$", text, re.M)
    if not src or not inc:
        errors.append("README.md: the layout table has no `src/` or no `include/ctrial/` row")
        return
    listed = set(re.findall(r"`(\w+)` \(", src.group(1)))
    modules = set(rule) - {"shim"}
    for mod in sorted(modules - listed):
        errors.append(f"README.md: the layout's src/ row leaves out module {mod}")
    for mod in sorted(listed - modules):
        errors.append(f"README.md: the layout's src/ row lists {mod}, which is no module")
    headers = {h for h in os.listdir(os.path.join(root, "include", "ctrial")) if h.endswith(".h")}
    named = set(re.findall(r"`(\w+\.h)`", inc.group(1)))
    for h in sorted(headers - named):
        errors.append(f"README.md: the layout's include/ctrial/ row leaves out {h}")
    for h in sorted(named - headers):
        errors.append(f"README.md: the layout's include/ctrial/ row names {h}, which is no public header")


def check_error_codes(root, errors):
    header = open(os.path.join(root, "include", "ctrial", "error.h")).read()
    codes = re.findall(r'XX\((\w+), (-?\d+), "[^"]*", "([^"]*)"\)', header)
    if not codes:
        errors.append("include/ctrial/error.h: no CT_ERRNO_MAP rows")
        return
    doc = open(os.path.join(root, "docs", "api", "error.md")).read()
    rows = re.findall(r"^\| `CT_(\w+)` \| (-?\d+) \| (.*?) \|$", doc, re.M)
    if [(n, v, t) for n, v, t in rows] != codes:
        want = ", ".join(f"CT_{n} {v}" for n, v, _ in codes)
        errors.append(f"docs/api/error.md: the table of codes differs from error.h's CT_ERRNO_MAP "
                      f"(name, value and meaning, in order: {want})")


def symbols(objects, defined):
    """Global symbols the objects define (defined=True) or refer to."""
    if not objects:
        return set()
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-g", "-P", flag] + objects, capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            names.add(parts[0])
    return names


def check_symbols(root, rule, objects_file, errors):
    objects = {}
    for line in open(objects_file):
        if ":" in line:
            m, objs = line.split(":", 1)
            # Only object files (a precompiled header may be listed too).
            objects[m.strip()] = [o for o in objs.split() if o.endswith(".o")]
    defined = {m: symbols(objs, True) for m, objs in objects.items()}
    for m, objs in objects.items():
        allowed = closure(rule, m) | {m}
        for sym in sorted(symbols(objs, False)):
            owners = [o for o, syms in defined.items() if sym in syms]
            if owners and not any(o in allowed for o in owners):
                errors.append(f"module {m} calls {sym}, which module {owners[0]} defines: {m} may not use "
                              f"{owners[0]}")
    check_header_symbols(root, rule, defined, errors)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source_dir")
    ap.add_argument("--objects", help="lines 'MODULE: OBJECT...' of a build (the test suite generates them)")
    a = ap.parse_args()
    root = os.path.abspath(a.source_dir)
    rule = read_rule(root)
    errors = []
    if "base" not in rule or "shim" not in rule:
        errors.append("src/CMakeLists.txt, shim/CMakeLists.txt: no ctrial_module(base ...) or ctrial_module(shim ...)")
    find_cycles(rule, errors)
    check_includes(root, rule, errors)
    check_design(root, rule, errors)
    check_diagram(root, rule, errors)
    check_readme(root, rule, errors)
    check_error_codes(root, errors)
    check_header_rows(root, rule, errors)
    check_internal_names(root, rule, errors)
    if a.objects:
        check_symbols(root, rule, a.objects, errors)
    for e in errors:
        print(e)
    pure = [m for m in rule if m != "shim" and "shim" not in closure(rule, m)]
    print(f"check_layers: {len(rule)} modules ({', '.join(pure)} pure C), {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
