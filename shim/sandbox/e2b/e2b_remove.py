# codeshim: remove the file _cs_name of /mnt/data (an e2b cell; e2b.c puts
# the line `_cs_name = "<name as a JSON string>"` before it). Only a
# regular file, never one reached through a symlink; prints removed/none.
import os as _cs_os, stat as _cs_st
_cs_d, _cs_r = '/mnt/data', 'none'
try:
    for _cs_x in _cs_name.split('/'):
        if _cs_os.path.islink(_cs_d):
            raise FileNotFoundError
        _cs_d = _cs_os.path.join(_cs_d, _cs_x)
    if _cs_st.S_ISREG(_cs_os.lstat(_cs_d).st_mode):
        _cs_os.remove(_cs_d)
        _cs_r = 'removed'
except (FileNotFoundError, NotADirectoryError):
    pass
print(_cs_r)
del _cs_os, _cs_st, _cs_d, _cs_r, _cs_name
