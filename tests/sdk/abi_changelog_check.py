#!/usr/bin/env python3
"""The ABI changelog (sdk/include/rh/rh_abi.h) and the headers, held to each
other (the rule is written above the CHANGELOG):

  - every member (or enum value) the changelog says version 1.N appended is
    declared in its struct with "ABI 1.N." first in its comment (above it or
    on its line), or
    sits in a "---- ... (ABI 1.N) ----" section of that struct;
  - every struct it says 1.N introduced has "(ABI 1.N" in the comment above
    its typedef;
  - and the other way: every member or struct the headers mark so is in the
    changelog under that version;
  - every entry (a function pointer) appended from 1.11 on takes its handle
    and one sized arguments struct, `rh_<Name>Args*` (docs/abi-v2.md).

Usage: abi_changelog_check.py SDK_INCLUDE_DIR. Exit 0 when they agree, 1
with one line per disagreement.
"""
import os
import re
import sys

HEADERS = ["rh_abi.h", "rh_host.h", "rh_strategy.h", "rh_hook.h", "rh_ckpt_io.h", "rh_plugin.h"]
VERSION = re.compile(r"^ \*   (1\.\d+)\s+(.*)$")
MEMBER_MARK = re.compile(r"^/\*\s*ABI (1\.\d+)\.")
SECTION = re.compile(r"^/\*\s*----.*?(?:\(ABI (1\.\d+)\))?\s*-*\s*\*/$")


def changelog(text):
    """{version: (set of (struct, member)), set of new structs}"""
    start = text.index(" * CHANGELOG")
    lines = text[start:text.index(" */", start)].splitlines()
    entries, current = {}, None
    for line in lines:
        m = VERSION.match(line)
        if m:
            current = m.group(1)
            entries[current] = m.group(2)
        elif current and line.startswith(" *        "):
            entries[current] += " " + line[len(" *        "):]
    out = {}
    for version, body in entries.items():
        if version == "1.0":
            continue
        added = body.split("changed:")[0]
        # Drop the reasons, which may hold commas, colons and semicolons.
        while True:
            stripped = re.sub(r"\([^()]*\)", "", added)
            if stripped == added:
                break
            added = stripped
        members, structs = set(), set()
        for part in added.split(";"):
            part = part.strip().rstrip(".")
            if not part:
                continue
            if ":" not in part:
                raise SystemExit(f"changelog {version}: '{part}' is not 'Struct: member, ...'")
            struct, names = (x.strip() for x in part.split(":", 1))
            if names in ("the struct", "the enum"):
                structs.add(struct)
                continue
            for name in names.split(","):
                members.add((struct, name.strip()))
        out[version] = (members, structs)
    return out


def declarations(path):
    """Yields (struct, member or None, version marked or None): a member of a
    struct with the ABI version its comment or section gives it, or a struct
    (member None) with the version in the comment above its typedef."""
    lines = open(path).read().splitlines()
    struct, section, comment, last_comment = None, None, [], ""
    is_enum = False
    in_comment = False
    for line in lines:
        s = line.strip()
        if in_comment:
            comment.append(s)
            if "*/" in s:
                in_comment = False
                last_comment = " ".join(comment)
            continue
        if s.startswith("/*"):
            m = SECTION.match(s)
            if m and struct is not None:
                section = m.group(1)
                last_comment = ""
                continue
            comment = [s]
            if "*/" not in s:
                in_comment = True
            else:
                last_comment = s
            continue
        m = re.match(r"typedef (struct|enum) (rh_\w+) \{", s)
        if m:
            struct, section = m.group(2), None
            is_enum = m.group(1) == "enum"
            found = re.search(r"\(ABI (1\.\d+)", last_comment)
            yield struct, None, found.group(1) if found else None
            last_comment = ""
            continue
        if struct is not None and re.match(r"\} (rh_\w+);", s):
            struct, last_comment = None, ""
            continue
        if struct is None or not s or s.startswith("*") or s.startswith("#"):
            continue
        name = None
        m = re.search(r"\(\*(\w+)\)\s*\(", s)
        e = re.match(r"(RH_\w+)\s*=\s*[^,/]+,?", s) if is_enum else None
        if e:
            name = e.group(1)  # an enum's value
        elif m:
            name = m.group(1)
        else:
            m = re.match(r"[\w\s\*]+?\b(\w+)(\[\w*\])?;", s)
            if m:
                name = m.group(1)
        if name is None:
            continue  # a continued parameter list
        trailing = s[s.index("/*"):] if "/*" in s else ""
        version = None
        for text in (trailing, last_comment):
            m = MEMBER_MARK.match(text)
            if m:
                version = m.group(1)
                break
        yield struct, name, version or section
        last_comment = ""


def main():
    include = os.path.join(sys.argv[1], "rh")
    log = changelog(open(os.path.join(include, "rh_abi.h")).read())
    declared_members, declared_structs = {}, {}
    for header in HEADERS:
        for struct, name, version in declarations(os.path.join(include, header)):
            if name is None:
                declared_structs[struct] = (version, header)
            else:
                declared_members[(struct, name)] = (version, header)
    problems = []
    listed = {}
    for version, (members, structs) in sorted(log.items()):
        for key in members:
            listed[key] = version
            if key not in declared_members:
                problems.append(f"changelog {version}: {key[0]}.{key[1]} is declared in no header")
            elif declared_members[key][0] != version:
                problems.append(
                    f"changelog {version}: {key[0]}.{key[1]} ({declared_members[key][1]}) is "
                    f"marked {declared_members[key][0] or 'with no version'}, not 'ABI {version}.'")
        for struct in structs:
            listed[(struct, None)] = version
            if struct not in declared_structs:
                problems.append(f"changelog {version}: struct {struct} is declared in no header")
            elif declared_structs[struct][0] != version:
                problems.append(f"changelog {version}: struct {struct} is marked "
                                f"{declared_structs[struct][0] or 'with no version'}, "
                                f"not '(ABI {version}' above its typedef")
    texts = {h: open(os.path.join(include, h)).read() for h in HEADERS}
    for version, (members, _) in log.items():
        if tuple(int(x) for x in version.split(".")) < (1, 11):
            continue
        for struct, name in members:
            header = declared_members.get((struct, name), (None, None))[1]
            m = re.search(r"\(\*" + name + r"\)\(([^;]*)\);", texts.get(header, ""))
            if m is None:
                continue  # a field, not an entry
            params = " ".join(m.group(1).split())
            if not re.fullmatch(r"(const )?rh_\w+ ?\* ?\w+, (const )?rh_\w+Args ?\* ?\w+", params):
                problems.append(f"{header}: {struct}.{name} (ABI {version}) takes ({params}): an "
                                f"entry appended from 1.11 on takes its handle and one sized "
                                f"rh_...Args struct (docs/abi-v2.md)")
    new_structs = {s for s, (v, _) in declared_structs.items() if v}
    for (struct, name), (version, header) in sorted(declared_members.items()):
        if version and struct not in new_structs and listed.get((struct, name)) != version:
            problems.append(f"{header}: {struct}.{name} is marked ABI {version} but the "
                            f"changelog does not list it under {version}")
    for struct, (version, header) in sorted(declared_structs.items()):
        if version and listed.get((struct, None)) != version:
            problems.append(f"{header}: struct {struct} is marked ABI {version} but the "
                            f"changelog does not list it under {version} ('{struct}: the struct')")
    for p in problems:
        print(p)
    checked = sum(len(m) + len(s) for m, s in log.values())
    print(f"abi changelog: {checked} entries of {len(log)} versions checked, "
          f"{len(problems)} disagreement(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
