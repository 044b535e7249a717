#!/usr/bin/python3
"""check_settings_docs.py DUMP README.md MANPAGE - the README's configuration
table and the man page's ENVIRONMENT section against the library's one table
of settings (shim/system/settings.c, printed by build/tools/settings_dump as DUMP).

README: one row per setting (two settings may share a row, `A` / `B`, when
they take the same values), no row for a name the table lacks but the
launcher's own CODESHIM_LIB; each row's default cell starts with the table's
default and its range cell with the table's range (booleans "boolean",
words "`a` `b`", numbers and sizes "lo–hi"); the meaning is free prose.

Man page: one entry (.TP then .B NAME) per setting in ENVIRONMENT, and for
every setting with a default the table can state, the line
"Default D." or "Default D, range LO to HI." in its entry. In OPTIONS, an
entry for every launcher option of the table (and none the table lacks
but the launcher's own), naming the variable it sets and, for a number,
the range the launcher takes ("LO to HI", in digits). In NAMED SANDBOXES
and the README's "Settings:" sentence of its Named sandboxes section,
exactly the table's CODESHIM_CONFIG keys (and "selectable"), the man page
with the variable each shares its values with.

Exit status 0, or 1 with every difference listed.
"""
import re
import sys

LAUNCHER_ONLY = {"CODESHIM_LIB"}


def read_dump(path):
    rows = {}
    with open(path) as f:
        for line in f:
            (var, kind, default, rng, option, arg, lo, hi, key,
             help_) = line.rstrip("\n").split("\t")
            rows[var] = {"kind": kind, "default": default, "range": rng, "option": option,
                         "lo": lo, "hi": hi, "key": key}
    return rows


def readme_default(row):
    return row["default"]


def readme_range(row):
    kind, rng = row["kind"], row["range"]
    if kind == "bool":
        return "boolean"
    if kind in ("num", "size"):
        return rng.replace("..", "\u2013")
    if kind in ("word", "level"):
        return " ".join("`%s`" % w for w in rng.split("|"))
    return None  # free text: "path", "directory", "YAML file", ...


def starts(cell, want):
    """cell begins with want, followed by nothing or a word boundary."""
    if not cell.startswith(want):
        return False
    rest = cell[len(want):]
    return rest == "" or rest[0] in " ,;:("


def check_readme(text, table, errors):
    if "## Configuration" not in text:
        errors.append("README: no ## Configuration section")
        return
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    seen = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4:
            errors.append("README: a configuration row without 4 cells: %s" % line)
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        for name in names:
            if name in seen:
                errors.append("README: %s has two rows" % name)
            seen[name] = cells
    for name in sorted(set(seen) - set(table) - LAUNCHER_ONLY):
        errors.append("README: %s is in the configuration table but not a setting" % name)
    for name in [n for n in table if n not in seen]:
        errors.append("README: no configuration row for %s" % name)
    for name, cells in seen.items():
        row = table.get(name)
        if not row:
            continue
        default = cells[1].replace("`", "")
        if not starts(default, readme_default(row)):
            errors.append("README: %s's default cell %r does not start with %r" %
                          (name, cells[1], readme_default(row)))
        want = readme_range(row)
        if want is not None and not starts(cells[2], want):
            errors.append("README: %s's range cell %r does not start with %r" %
                          (name, cells[2], want))


def roff_plain(s):
    return s.replace("-", "\\-")


def man_default_line(row):
    kind, default, rng = row["kind"], row["default"], row["range"]
    if kind in ("num", "size"):
        lo, hi = rng.split("..")
        return "Default %s, range %s to %s." % (default, lo, hi)
    if kind in ("bool", "word", "level"):
        return "Default %s." % roff_plain(default)
    return None  # paths and text: the entry says it in its own words


def check_man(text, table, errors):
    try:
        start = text.index(".SH ENVIRONMENT\n")
    except ValueError:
        errors.append("man page: no ENVIRONMENT section")
        return
    end = text.find("\n.SH ", start + 1)
    env = text[start:end if end > 0 else len(text)]
    entries = {}
    for chunk in env.split("\n.TP\n")[1:]:
        head = chunk.split("\n", 1)[0]
        m = re.match(r'\.BR? ([A-Z0-9_]+)(?: ", " ([A-Z0-9_]+))?$', head)
        if not m:
            continue
        for name in m.groups():
            if name:
                if name in entries:
                    errors.append("man page: %s has two ENVIRONMENT entries" % name)
                entries[name] = chunk
    for name, row in table.items():
        if name not in entries:
            errors.append("man page: no ENVIRONMENT entry (.TP, .B %s) for %s" % (name, name))
            continue
        want = man_default_line(row)
        if want and want not in entries[name].splitlines():
            errors.append("man page: %s's entry lacks the line %r" % (name, want))


# The launcher's options that are not rows of the table.
LAUNCHER_OPTIONS = {"lib", "check", "help", "version", "settings"}


def man_section(text, title):
    start = text.find(".SH %s\n" % title)
    if start < 0:
        return None
    end = text.find("\n.SH ", start + 1)
    return text[start:end if end > 0 else len(text)]


def check_man_options(text, table, errors):
    sect = man_section(text, "OPTIONS")
    if sect is None:
        errors.append("man page: no OPTIONS section")
        return
    entries = {}
    for chunk in sect.split("\n.TP\n")[1:]:
        head = chunk.split("\n", 1)[0]
        for name in re.findall(r"\\-\\-([a-z0-9\\-]+)", head):
            entries[name.replace("\\-", "-")] = chunk
    options = {row["option"]: (var, row) for var, row in table.items() if row["option"]}
    for name in sorted(set(entries) - set(options) - LAUNCHER_OPTIONS):
        errors.append("man page: OPTIONS has --%s, which the table has no row for" % name)
    for name in sorted(LAUNCHER_OPTIONS - set(entries)):
        errors.append("man page: OPTIONS lacks the launcher's own --%s" % name)
    for name, (var, row) in options.items():
        chunk = entries.get(name)
        if chunk is None:
            errors.append("man page: OPTIONS lacks --%s (%s)" % (name, var))
            continue
        flat = " ".join(chunk.split())
        if var not in flat:
            errors.append("man page: OPTIONS' --%s does not name %s" % (name, var))
        if row["kind"] in ("num", "size"):
            want = "%s to %s" % (row["lo"], row["hi"])
            if want not in flat:
                errors.append("man page: OPTIONS' --%s does not say %r" % (name, want))


def check_file_keys(readme, man, table, errors):
    want = {row["key"]: var for var, row in table.items() if row["key"]}
    sect = man_section(man, "NAMED SANDBOXES")
    if sect is None:
        errors.append("man page: no NAMED SANDBOXES section")
    else:
        got = dict(re.findall(r"^\.B ([a-z_]+)\n\.RB \( ([A-Z0-9_]+) \)", sect, re.M))
        for k in sorted(set(want) | set(got)):
            if want.get(k) != got.get(k):
                errors.append("man page: NAMED SANDBOXES gives %s as %s; the table: %s" %
                              (k, got.get(k), want.get(k)))
        if not re.search(r"^\.B selectable$", sect, re.M):
            errors.append("man page: NAMED SANDBOXES does not name selectable")
    m = re.search(r"Settings: (.*?); each takes", readme, re.S)
    if not m:
        errors.append("README: no \"Settings: ...; each takes\" sentence of the config file")
        return
    keys = re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", m.group(1)))
    if sorted(keys) != sorted(list(want) + ["selectable"]):
        errors.append("README: the config file's settings %s are not the table's %s" %
                      (sorted(keys), sorted(list(want) + ["selectable"])))


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    table = read_dump(argv[1])
    errors = []
    with open(argv[2]) as f:
        readme = f.read()
    check_readme(readme, table, errors)
    with open(argv[3]) as f:
        man = f.read()
    check_man(man, table, errors)
    check_man_options(man, table, errors)
    check_file_keys(readme, man, table, errors)
    for e in errors:
        print("check_settings_docs: " + e)
    if not errors:
        print("settings docs: README and man page match the %d settings" % len(table))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
