# codeshim: the files of /mnt/data, as JSON [[name, size, mtime_ns, inode],
# ...] (an e2b cell run after each execution; embed.py puts listing.py, the
# one listing both backends use, with its caps, before it)
print("[%s]" % ",".join("[%s,%d,%d,%d]" % f
                        for f in _cs_list_files('/mnt/data')))
del _cs_list_files, _CS_LIST_FILES, _CS_LIST_SCAN, _CS_LIST_DEPTH, \
    _CS_LIST_NAME_BYTES
