#!/bin/sh
# check_outside_refs.sh - no file of the repository points at text outside
# it: the design notes and wire-format reference the project was written
# from, or the tracker's issue numbers. Each comment says what it means in
# place, or points into doc/. Run from the top of the repository by
# `make docs-check` (part of `make test`); exit status 1 lists the lines.
# (The patterns are written so that they do not match this file.)
set -u
pattern='[.][.]/shared|/work/shar[e]d|DESIGN[.]md|wire[-]formats|[Ii]ssue #?[0-9]+'
hits=$(grep -rnIE "$pattern" --exclude-dir=corpus --exclude-dir=crashes \
       Makefile README.md shim sessiond cli tests bench doc scripts examples 2>/dev/null)
if [ -n "$hits" ]; then
    echo "check_outside_refs: these lines point outside the repository:"
    echo "$hits"
    exit 1
fi
echo "outside references: none"
