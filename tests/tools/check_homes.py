#!/usr/bin/python3
"""One home for every job (`make homes`, part of `make test`).

Each job below is written once, in its home; this check fails when a
second copy appears anywhere else in the C sources (shim/, sessiond/,
cli/): a URL split by hand instead of through shim/system/url.c (libcurl's own
curl_url), a SHA-256 digest turned into hex or a tagged name hashed by
hand instead of shim/base/sha256.c, a path joined or a file read under a cap
by hand instead of shim/base/fileio.c, the wall clock read anywhere but
shim/base/clock.h.

Usage: check_homes.py REPO  (prints "homes: ok" or each copy found,
file:line: what, and exits 1)."""

import pathlib
import re
import sys

# (what, home files, pattern on the source with comments removed)
JOBS = [
    ("a URL split by hand (use url.h: libcurl's curl_url)", {"shim/system/url.c"},
     re.compile(r'\b(?:strstr|strncmp|memcmp|memmem)\s*\([^;]*"://"'
                r'|\bstrcspn\s*\(\s*[^,;()]+,\s*"[^"]*[?#][^"]*"\s*\)'
                r'|\bstrspn\s*\(\s*url\b')),
    ("a SHA-256 digest made hex by hand (use sha256.h)", {"shim/base/sha256.c", "shim/base/text.c", "shim/base/text.h"},
     re.compile(r'\bshim_text_hex\s*\(|"%02x"')),
    ("a tagged name hashed by hand (use shim_sha256_tagged_hex)", {"shim/base/sha256.c"},
     re.compile(r'shim_sha256_update\s*\([^;]*\btag\b[^;]*strlen\s*\(\s*tag\s*\)\s*\+\s*1')),
    ("a path joined by hand (use shim_fileio_join)", {"shim/base/fileio.c"},
     re.compile(r'\bsnprintf\s*\([^;]*"%s/%s(?:/%s)?"')),
    ("a capped read loop by hand (use fileio.h)", {"shim/base/fileio.c"},
     re.compile(r'\bread\s*\(\s*\w+\s*,\s*[\w>.-]+\s*\+\s*\w+')),
    ("the wall clock read by hand (use clock.h)", {"shim/base/clock.h"},
     re.compile(r'\btime\s*\(\s*(?:NULL|0|&\w+)\s*\)|\bgettimeofday\s*\(|\bCLOCK_REALTIME\b')),
]

# string and character literals first, so a "//" inside one is no comment
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def uncommented(text):
    """text with its comments blanked (literals kept), line numbers kept."""
    def blank(m):
        t = m.group(0)
        return re.sub(r'[^\n]', ' ', t) if t[0] == "/" else t
    return TOKEN.sub(blank, text)


def sources(repo):
    for d in ("shim", "sessiond", "cli"):
        for p in sorted((repo / d).rglob("*")):
            if p.suffix in (".c", ".h"):
                yield p


def main(argv):
    repo = pathlib.Path(argv[1] if len(argv) > 1 else ".").resolve()
    found = []
    for p in sources(repo):
        rel = p.relative_to(repo).as_posix()
        text = uncommented(p.read_text(errors="replace"))
        for what, homes, pat in JOBS:
            if rel in homes:
                continue
            for m in pat.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{rel}:{line}: {what}")
    if found:
        print("homes: a job written outside its home:")
        for f in found:
            print("  " + f)
        return 1
    print("homes: ok (one URL parser, hash to hex, path join, capped reader, wall clock)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
