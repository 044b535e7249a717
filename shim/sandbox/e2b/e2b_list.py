# codeshim: the files of /mnt/data, as JSON [[name, size, mtime_ns], ...]
# (an e2b cell run after each execution; at most 1000 files, 64 folders
# a level, no symlinks, no __pycache__)
import os as _cs_os, json as _cs_json
_cs_l = []
for _cs_d, _cs_dn, _cs_fn in _cs_os.walk('/mnt/data'):
    _cs_dn[:] = [x for x in _cs_dn if x != '__pycache__'][:64]
    for _cs_f in _cs_fn:
        _cs_p = _cs_os.path.join(_cs_d, _cs_f)
        if len(_cs_l) < 1000 and _cs_os.path.isfile(_cs_p) and not _cs_os.path.islink(_cs_p):
            _cs_s = _cs_os.lstat(_cs_p)
            _cs_l.append([_cs_os.path.relpath(_cs_p, '/mnt/data'), _cs_s.st_size,
                          _cs_s.st_mtime_ns])
print(_cs_json.dumps(sorted(_cs_l)))
del _cs_os, _cs_json, _cs_l
