# listing.py - the one listing of a sandbox's working directory (/mnt/data),
# for both backends: embed.py joins it into the local sandbox's source
# (shim/sandbox/worker/, whose supervisor lists after each execution) and
# puts it before the e2b backend's list cell (e2b/e2b_list.py, run in e2b's
# kernel after each execution, so its names start with _cs_ and that cell
# deletes them).
#
# What is listed: regular files only, never through a symlink, no
# __pycache__ folder; names relative to the top, "/"-separated, bytes that
# are not UTF-8 as \xNN. The caps, the one place they are written
# (api/result.h's SHIM_RESULT_MAX_FILES and the local reply's parser,
# local_chan.c, take at least this much):
_CS_LIST_FILES = 1000  # files listed at most
_CS_LIST_SCAN = 20000  # directory entries looked at, at most
_CS_LIST_DEPTH = 16  # folder levels below the top
_CS_LIST_NAME_BYTES = 512 << 10  # the names in all, as JSON strings, each + 1


def _cs_list_files(top):
    # -> sorted [(name as an ASCII JSON string, size, mtime_ns, inode)]
    try:
        from _json import encode_basestring_ascii as enc
    except ImportError:  # not CPython
        from json.encoder import encode_basestring_ascii as enc
    import os
    found = []
    size = 0
    scanned = 0
    stack = [(top, "", 0)]
    while stack:
        path, rel, depth = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue
        with it:
            for e in it:
                scanned += 1
                if scanned > _CS_LIST_SCAN or len(found) >= _CS_LIST_FILES:
                    return sorted(found)
                try:
                    if e.is_dir(follow_symlinks=False):
                        if depth < _CS_LIST_DEPTH and e.name != "__pycache__":
                            stack.append((e.path, rel + e.name + "/",
                                          depth + 1))
                    elif e.is_file(follow_symlinks=False):
                        s = e.stat(follow_symlinks=False)
                        name = enc((rel + e.name).encode(
                            "utf-8", "surrogateescape").decode(
                            "utf-8", "backslashreplace"))
                        size += len(name) + 1
                        if size > _CS_LIST_NAME_BYTES:
                            return sorted(found)
                        found.append((name, s.st_size, s.st_mtime_ns,
                                      s.st_ino))
                except OSError:
                    pass
    return sorted(found)
